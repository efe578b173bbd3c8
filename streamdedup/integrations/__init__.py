"""Beside the scraper: ``scrapy.py``, an item pipeline that sends every scraped job ad to
streamdedup's input topic (the ``scrapy`` extra)."""

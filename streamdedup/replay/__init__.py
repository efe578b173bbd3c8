"""Historical dumps: reading them (``dump.py``, ``json_array.py`` for a dump that is one JSON
array; ``read_ahead.py`` reads and sketches ahead in a second process for ``check``;
``dump_texts.py`` finds some ids' texts), replaying them through Kafka and a consumer
(``runner.py``, its options in ``config.py``), backfilling a store from
them (``backfill.py``; candidate pairs in ``pairs.py``, on Spark in ``spark.py``), and
measuring the verdicts against exact ground truth (``truth.py``, ``evaluation.py``,
``report.py``, ``plots.py``; the ``report`` extra)."""

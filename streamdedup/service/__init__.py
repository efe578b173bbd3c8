"""The Kafka service: a thin loop around the detector (``consumer.py``), the commit order that
makes it safe (``checkpoint.py``), message decoding, output records, metrics and logs."""

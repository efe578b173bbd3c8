"""The Kafka service: a thin loop around the detector (``consumer.py``), the commit order that
makes it safe (``checkpoint.py``), the clients and topics (``kafka.py``), a second process
sketching big batches ahead (``sketch_worker.py``), message decoding (``message.py``), output
records (``records.py``), watching a shared store (``store_watch.py``) and a fenced static
member (``fence.py``), commits before a rebalance (``rebalance.py``), the stop on a signal
(``stop.py``), metrics (``metrics.py``) and logs (``logs.py``)."""

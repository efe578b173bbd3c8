"""Historical dumps: reading them (``dump.py``), replaying them through Kafka and a consumer
(``runner.py``), and measuring the verdicts against exact ground truth (``truth.py``,
``evaluation.py``, ``report.py``, ``plots.py``; the ``report`` extra)."""

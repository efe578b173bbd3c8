"""The detector: the core's pure steps driven against a store, one batch at a time.

It sits above both ``core`` (text -> shingles -> signature -> band keys -> Jaccard ->
verdict, no I/O) and ``store`` (what is kept, knowing nothing of sketches): ``detector.py``
for one writer, ``shared_detector.py`` for many consumers on one shared index (Redis)."""

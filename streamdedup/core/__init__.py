"""The core: fields -> normalized text -> shingles -> set id -> MinHash signature -> band
keys -> exact Jaccard -> verdict, functions of their inputs. No network or store I/O of
its own: the detector reaches its state only through the ``Store`` interface
(``streamdedup.store``, the layer below). What it does read, once, at start: a stopword
file a setting names and the stemmer's module (``text.py``); and the wall clock, for a
document without a time under retention and for a time too far ahead
(``retention.now_ms``)."""

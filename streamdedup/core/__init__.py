"""The core: fields -> normalized text -> shingles -> set id -> MinHash signature -> band
keys -> exact Jaccard -> verdict, functions of their inputs. No network or store I/O: the
detector that drives these steps against a store is one layer up (``streamdedup.detection``).
What it does read, once, at start: a stopword file a setting names and the stemmer's module
(``text.py``); and the wall clock, for a document without a time under retention and for a
time too far ahead (``retention.now_ms``)."""

"""The pure core: fields -> normalized text -> shingles -> set id -> MinHash signature -> band
keys -> exact Jaccard -> verdict. No I/O; the detector reaches its state only through the
``Store`` interface (``streamdedup.store``), the layer below."""

"""The allocator setting of the sketching processes (streamdedup/heap.py): batches of
arrays reuse freed pages instead of faulting new ones in, counted by the kernel."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamdedup import heap

# A batch's worth of arrays (8 of 0.16-3.2 MB, touched), freed, 100 times; prints the page
# faults taken meanwhile.
BATCHES = """
import resource, sys
import numpy as np
from streamdedup import heap
if sys.argv[1] == "held":
    assert heap.hold()
rng = np.random.default_rng(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    arrays = [np.ones(int(n)) for n in rng.integers(20_000, 400_000, 8)]
    del arrays
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    run = subprocess.run([sys.executable, "-c", BATCHES, mode], capture_output=True,
                         text=True, check=True)
    return int(run.stdout)


@pytest.mark.skipif(not hasattr(os, "confstr") or "glibc" not in (
    os.confstr("CS_GNU_LIBC_VERSION") or ""), reason="mallopt is glibc's")
def test_held_batches_reuse_their_pages() -> None:
    """Measured here: ~145,000 faults with glibc's defaults, ~21,000 held."""
    free, held = faults("free"), faults("held")
    assert held * 3 < free, (held, free)


def test_hold_says_whether_it_took(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_glibc(name: str) -> str:
        raise ValueError(name)

    monkeypatch.setattr(os, "confstr", no_glibc)
    assert heap.hold() is False

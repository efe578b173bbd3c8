"""glibc's allocator told to keep what a batch frees for the next batch (the sketching
processes: ``check``'s reading child and the consumer's sketch worker).

Why: sketching a batch of 500 ads allocates numpy arrays of 0.1-3 MB that live until the
batch is sent. glibc maps large blocks on their own and hands the top of its heap back to
the kernel once 128 KB are free there, so every batch faulted its pages in again: in
``check``'s reading child, 637,000 page faults and 2.4-2.8 s of system time per 50,000
generated ads, a fifth of its CPU. With blocks under 4 MB taken from the heap and 16 MB
kept free at its top: 20,000 faults and 0.2-0.3 s (measured with ``getrusage``). The cost
is at most those 16 MB held while the process lives.

Only glibc has ``mallopt``; elsewhere ``hold`` does nothing and says so.
"""

from __future__ import annotations

import ctypes
import os

# mallopt parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20  # blocks at least this big get a mapping of their own
TRIM_THRESHOLD = 16 << 20  # free memory kept at the top of the heap


def hold() -> bool:
    """Set both thresholds for this process (and those it forks afterwards); returns
    whether the allocator took them."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):  # not glibc
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))

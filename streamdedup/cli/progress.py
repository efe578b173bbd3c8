"""Progress bars on a terminal only: tqdm costs 50 ms of import (its version lookup reads
package metadata), a twelfth of a one-line ``check``, and draws nothing into a pipe."""

from __future__ import annotations

import sys
from typing import Any


class _Quiet:
    """What a bar does off a terminal: nothing, except pass messages on."""

    def update(self, n: int = 1) -> None:
        pass

    def write(self, message: str, file: Any = None) -> None:
        print(message, file=file or sys.stderr)

    def close(self) -> None:
        pass


def progress_bar(**options: Any) -> Any:
    """A tqdm bar on standard error when it is a terminal; otherwise a quiet stand-in."""
    if not sys.stderr.isatty():
        return _Quiet()
    from tqdm import tqdm

    return tqdm(file=sys.stderr, **options)

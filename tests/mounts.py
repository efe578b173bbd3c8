"""Small tmpfs mounts for tests of what a store does on a full or read-only disk (root only:
CI runs as root; elsewhere those tests are skipped). The mounting is the harness's
(``harness/mounts.py``); here, what a test does when it fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.mounts import mount_tmpfs, unmount


def tmpfs(path: Path, size: str, *options: str) -> None:
    if mount_tmpfs(path, size, *options):
        pytest.skip("needs root to mount a small tmpfs (CI runs as root)")


def read_only(path: Path) -> None:
    """Remount ``path`` (a tmpfs of ours) read-only, its files kept."""
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)


def umount(path: Path) -> None:
    """Unmount; a busy mount (a file handle left open) fails the test."""
    said = unmount(path)
    if said:
        pytest.fail(f"{path} was still busy (a store left a file open): {said}")

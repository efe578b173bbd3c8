"""Small tmpfs mounts for tests of what a store does on a full or read-only disk (root only:
CI runs as root; elsewhere those tests are skipped). The mounting is the harness's
(``harness/mounts.py``); here, what a test does when it fails."""

from __future__ import annotations

import os
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


def bind_read_only(source: Path, path: Path) -> None:
    """``source`` seen read-only at ``path`` (a container's ``:ro`` volume), while it stays
    writable where it is."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(source), str(path)],
                                            capture_output=True).returncode:
        pytest.skip("needs root to bind-mount a directory (CI runs as root)")
    subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)


def umount(path: Path) -> None:
    """Unmount; a busy mount (a file handle left open) fails the test."""
    said = unmount(path)
    if said:
        pytest.fail(f"{path} was still busy (a store left a file open): {said}")

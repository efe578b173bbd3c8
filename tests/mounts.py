"""Small tmpfs mounts for tests of what a store does on a full or read-only disk (root only:
CI runs as root; elsewhere those tests are skipped)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def tmpfs(path: Path, size: str, *options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}", *options))
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs",
                                            str(path)], capture_output=True).returncode:
        pytest.skip("needs root to mount a small tmpfs (CI runs as root)")


def read_only(path: Path) -> None:
    """Remount ``path`` (a tmpfs of ours) read-only, its files kept."""
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)


def umount(path: Path) -> None:
    """Unmount; a busy mount (a file handle left open) fails the test."""
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True, check=False)
    if done.returncode:
        subprocess.run(["umount", "-l", str(path)], check=False)
        pytest.fail(f"{path} was still busy (a store left a file open): {done.stderr}")

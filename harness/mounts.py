"""Small tmpfs mounts (root only): a chaos consumer's store on a disk that can really fill
(``chaos/store.py``), and the tests of a store on a full or read-only disk
(``tests/mounts.py``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def mount_tmpfs(path: Path, size: str, *options: str) -> str:
    """Mount a tmpfs of ``size`` (``8m``) at ``path`` (made if missing); why not, or ''."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "not root"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join((f"size={size}", *options)),
                           "tmpfs", str(path)], capture_output=True, text=True, check=False)
    return "" if done.returncode == 0 else done.stderr.strip() or f"mount: {done.returncode}"


def unmount(path: Path) -> str:
    """Unmount ``path``; a busy mount is detached lazily, and what umount said is returned
    ('' when it went at once)."""
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return ""
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
    return done.stderr.strip() or f"umount: {done.returncode}"

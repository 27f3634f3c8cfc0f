"""Directories and files for this user alone: 0700 and 0600, whatever the umask.

Raven's config, data and logs can hold credentials and transcripts. Everything
Raven creates under them goes through here. Never widens a mode; narrows one
that lets others in.
"""

from __future__ import annotations

import os
from pathlib import Path


def private_dir(path: Path, narrow: bool = False) -> Path:
    """`path` as a directory, made 0700 (with its missing parents) if it was missing.

    `narrow` also narrows an existing one to 0700: only for a directory Raven alone
    uses (`logs/`), never one the user chose (a config file's folder may be a project).
    """
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if narrow and path.stat().st_mode & 0o077:
        path.chmod(0o700)
    return path


def private_file(path: Path) -> Path:
    """Create `path` (and its directory) if need be; either way it ends 0600.

    SQLite gives a database's -wal and -shm files the database's mode, so a store
    file made here keeps its journal private too. A symlink is the person's own
    arrangement (the file kept on another disk, in a dotfiles repository): it is
    followed, and the file it names is created 0600 if missing but never re-moded, for
    Raven did not make it.
    """
    private_dir(path.parent)
    if path.is_symlink():
        if not path.exists():
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        return path
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path

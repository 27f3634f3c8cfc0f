"""Logging for a face: `<config dir>/logs/<face>.log`, rotating at 10 MB with 3 kept.

The directory is 0700 and every log file 0600 (logs name paths, commands and
peers). Warnings and errors also go to stderr. Never writes to stdout.
"""

from __future__ import annotations

import io
import logging
import logging.handlers
import sys
from pathlib import Path

from raven.private_files import private_dir, private_file

MAX_LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 3
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(logs_dir: Path, face: str, stderr_level: int = logging.WARNING) -> Path:
    """Route the root logger to the face's log file and stderr; returns the file's path."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.INFO)
    path = logs_dir / f"{face}.log"
    try:
        private_dir(logs_dir, narrow=True)
        file_handler = _PrivateRotatingFileHandler(
            path, maxBytes=MAX_LOG_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
        )
        file_handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(file_handler)
    except OSError as exc:
        print(f"raven: cannot write the log file {path}: {exc.strerror}", file=sys.stderr)
    stderr_handler = logging.StreamHandler(sys.stderr)
    stderr_handler.setLevel(stderr_level)
    stderr_handler.setFormatter(logging.Formatter("raven: %(levelname)s: %(message)s"))
    root.addHandler(stderr_handler)
    for noisy in ("httpx", "httpcore", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return path


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Opens each log file, the first and every one after a rollover, 0600."""

    def _open(self) -> io.TextIOWrapper:
        path = private_file(Path(self.baseFilename))
        return open(path, "a", encoding=self.encoding, errors=self.errors)

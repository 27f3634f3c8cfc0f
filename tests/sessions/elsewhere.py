"""A store like the test's, held by another process: what a second Raven does to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from raven.sessions import Sessions

_SCRIPT = """
import asyncio, sys
from pathlib import Path
from raven.config import Paths, SessionsConfig
from raven.sessions import open_sessions
from raven.sessions.tasks import TaskRow

async def main(url, data, key):
    paths = Paths(config_file=Path(data) / "config.json", data_dir=Path(data))
    store = open_sessions(SessionsConfig(url=url or None), paths)
{body}
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    await store.aclose()

asyncio.run(main(*sys.argv[1:]))
"""


def another_process(store: Sessions, tmp_path: Path, key: str, body: str) -> subprocess.Popen[str]:
    """A Python process that opens a store like `store`, runs `body` (indented lines of
    an async function that has `store` and `key`), says so, and holds on until its stdin
    closes (then exits without undoing what it did)."""
    url = getattr(store, "_dsn", "")
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT.format(body=body), url, str(tmp_path / "data"), key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc

"""Which Raven servers are running here: one state file per kind of server in the data
directory (mode 0600), naming the pid and the URLs of the one running.

A server records itself once it listens and forgets itself when it stops; a reader
trusts a file only while its pid is alive (a killed server leaves a stale one). Never
holds a secret: URLs and pids only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

GATEWAY = "gateway.json"
"""The running `raven gateway` (or `raven web`): its URL, and its A2A endpoint if mounted."""
A2A_SERVE = "a2a-serve.json"
"""The running `raven a2a serve`: its JSON-RPC endpoint."""


def record(path: Path, **fields: Any) -> None:
    """Say that this process serves, with `fields` (URLs)."""
    from raven.config.store import write_private_file

    write_private_file(path, json.dumps({"pid": os.getpid(), **fields}))


def running(path: Path) -> dict[str, Any] | None:
    """What the state file says, if the process it names is alive."""
    try:
        state = json.loads(path.read_text())
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if isinstance(state, dict) else None


def recorded(path: Path) -> dict[str, Any] | None:
    """What the state file says, alive or not."""
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def forget(path: Path) -> None:
    """Remove the state file if this process wrote it."""
    state = recorded(path)
    if state is not None and state.get("pid") == os.getpid():
        path.unlink(missing_ok=True)

"""Who holds a claim that outlives processes: a session's turn, an A2A task's lease.

A holder is this process named so that any replica can judge it: a digest of the host
and of its boot, plus the pid. Peers never learn a host's name. A holder of this
machine that no longer runs (a kill -9, even before its parent reaps it; a reboot) is
known gone at once; another machine's holder is judged only by its lease's expiry.
Imports nothing of Raven's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any


def this_process() -> dict[str, Any]:
    """This process: which machine, which boot of it, which pid."""
    return {"host": _host(), "boot": _boot(), "pid": os.getpid()}


def this_holder() -> str:
    """`this_process()` as the text stored in a claim."""
    return json.dumps(this_process(), sort_keys=True)


def parse(holder: str) -> dict[str, Any]:
    """A stored holder as `this_process()` gave it; {} for one that is not."""
    try:
        value = json.loads(holder)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def on_this_machine(holder: dict[str, Any]) -> bool:
    return holder.get("host") == _host()


def gone(holder: Any) -> bool:
    """True when `holder` names a process of this machine that no longer runs."""
    if not isinstance(holder, dict) or not on_this_machine(holder):
        return False  # another machine's: only its lease's expiry tells
    if holder.get("boot") != _boot():
        return True  # this machine restarted since
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _exited(pid)


def _exited(pid: int) -> bool:
    """A process that exited and waits for its parent to reap it (a zombie): it holds
    nothing any more, though its pid still answers."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc here: the pid alone says it runs
    fields = stat.rsplit(")", 1)[-1].split()
    return bool(fields) and fields[0] in ("Z", "X")


@functools.cache
def _host() -> str:
    return _digest(socket.gethostname())


@functools.cache
def _boot() -> str:
    try:
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot_id = ""
    return _digest(boot_id)


def _digest(text: str) -> str:
    return hashlib.sha256(f"raven-runner:{text}".encode()).hexdigest()[:16]

"""Children die with Raven: a watcher kills their process groups when Raven is gone.

Raven's commands, sub-agents and MCP servers each run in a process group of their
own, which Raven stops itself on SIGTERM, SIGINT, SIGHUP and a normal exit. A
SIGKILL or a crash gives it no chance to, so the first group Raven watches starts
a watcher: a small Python process reading a pipe only Raven holds. Raven tells it
each group it starts (`watch`) and each it has stopped (`unwatch`); when the pipe
ends, however Raven went, the watcher SIGKILLs every group still watched, then
exits. The whole group goes, so a shell's own children go too.

POSIX only (elsewhere these calls do nothing). Never signals a group it was not
told of; a group is watched until as many `unwatch` calls as `watch` calls came.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

_WATCHER = """
import collections, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = collections.Counter()
for line in sys.stdin:
    groups[int(line[1:])] += 1 if line[0] == "+" else -1
for pgid, count in groups.items():
    if count > 0:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
"""

STOP_WAIT_S = 1.0
_lock = threading.Lock()
_watcher: subprocess.Popen[str] | None = None
_owner = 0
"""The pid that started the watcher: a forked child must not talk to its parent's."""


def watch(pgid: int) -> None:
    """Kill the process group `pgid` (a child started in a session of its own) if Raven
    dies before calling `unwatch` for it."""
    _tell(f"+{pgid}\n")


def unwatch(pgid: int) -> None:
    """The group `pgid` was stopped (or ended); the watcher forgets one `watch` of it."""
    _tell(f"-{pgid}\n")


def children() -> set[int]:
    """The pids of this process's children (Linux), for children started by a library
    that does not say which process it started; empty where that cannot be read."""
    found: set[int] = set()
    try:
        for task in Path("/proc/self/task").iterdir():
            found.update(int(pid) for pid in (task / "children").read_text().split())
    except OSError:
        pass
    return found


def _tell(line: str) -> None:
    if os.name != "posix":
        return
    global _watcher, _owner
    with _lock:
        try:
            if _watcher is None or _owner != os.getpid():
                _watcher, _owner = _start(), os.getpid()
            assert _watcher.stdin is not None
            _watcher.stdin.write(line)
            _watcher.stdin.flush()
        except OSError as exc:
            log.warning("cannot tell the child watcher about process group %s: %s", line[1:-1], exc)
            _watcher = None


def _start() -> subprocess.Popen[str]:
    watcher = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _WATCHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a hang-up of the terminal does not reach it
        text=True,
    )
    atexit.register(_stop, watcher)
    return watcher


def _stop(watcher: subprocess.Popen[str]) -> None:
    """At a normal exit: the pipe ends as it would at a crash; the watcher is reaped."""
    with contextlib.suppress(OSError):
        assert watcher.stdin is not None
        watcher.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watcher.wait(STOP_WAIT_S)

"""Children die with Raven: a watcher kills every process Raven started when Raven is killed.

Raven stops its commands, sub-agents and MCP servers itself on SIGTERM, SIGINT,
SIGHUP, end of input and a normal exit. A SIGKILL or a crash gives it no chance
to, so every child Raven starts carries a mark in its environment (`env()`),
which its own children inherit, and the first mark handed out starts a watcher:
a small Python process reading a pipe only Raven holds. If the pipe ends without
Raven's goodbye, Raven is gone: the watcher SIGKILLs every process whose
environment bears this Raven's mark (a shell's children, a sub-agent's commands,
a server that left its process group), then exits. A mark lists every Raven
above the process, so a Raven killed above a sub-agent takes the sub-agent's
children too.

A process can lose the mark (a command run under `env -i`), so the watcher is also
told of each process group Raven starts (`hold`, from `raven.process_group.spawn`,
before anything runs in the group) and kills those groups too; a group is let go
(`let_go`) once its leader is reaped, before its number can be anyone else's.

Linux only (it reads /proc); elsewhere `env()` marks nothing. Never signals a
process outside a group Raven started that lacks the mark; after a normal exit it
signals nothing at all.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import subprocess
import sys
import threading

MARK = "RAVEN_LIFELINE"
"""The environment variable holding the marks of every Raven above a process."""
STOP_WAIT_S = 1.0
_GOODBYE = "goodbye"

_WATCHER = f"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    if line == {_GOODBYE + chr(10)!r}:
        sys.exit(0)  # a normal exit: Raven stopped what it had to
    if line[:1] in "+-" and line[1:].strip().isdigit() and int(line[1:]) > 1:
        (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
mark, me = sys.argv[1].encode(), os.getpid()
for group in groups:  # what lost the mark (`env -i`) is still in its group
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
for _ in range(5):  # again while it finds some: one may have forked as it went
    killed = 0
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as environ:
                variables = environ.read().split(b"\\0")
        except OSError:
            continue
        marks = [v[{len(MARK) + 1}:].split() for v in variables if v.startswith(b"{MARK}=")]
        if pid != me and marks and mark in marks[0]:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    if not killed:
        break
"""

_lock = threading.Lock()
_watcher: subprocess.Popen[str] | None = None
_owner = 0
"""The pid that started the watcher: a forked child must not talk to its parent's."""
_mark = ""


def env() -> dict[str, str]:
    """What to add to a child's environment so that it dies with Raven (the marks of the
    Ravens above this one, then this one's); empty where that cannot be done."""
    if not sys.platform.startswith("linux"):
        return {}
    global _watcher, _owner, _mark
    with _lock:
        if _watcher is None or _owner != os.getpid():
            _mark = secrets.token_hex(8)
            _watcher, _owner = _start(_mark), os.getpid()
    inherited = os.environ.get(MARK, "")
    return {MARK: f"{inherited} {_mark}".strip()}


def hold(pgid: int) -> None:
    """Tell the watcher of a process group Raven started: if Raven is killed, the whole
    group goes, a member whose environment lost the mark included. Returns once the
    watcher's pipe has it, so a child may run from then on."""
    _tell(f"+{pgid}\n")


def let_go(pgid: int) -> None:
    """The group's leader was reaped: its number may soon be another group's."""
    _tell(f"-{pgid}\n")


def _tell(line: str) -> None:
    if not env():  # not Linux: no watcher
        return
    with _lock, contextlib.suppress(OSError, ValueError):
        assert _watcher is not None and _watcher.stdin is not None
        _watcher.stdin.write(line)
        _watcher.stdin.flush()


def _start(mark: str) -> subprocess.Popen[str]:
    watcher = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _WATCHER, mark],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C or a hang-up of the terminal does not reach it
        text=True,
    )
    atexit.register(_goodbye, watcher)
    return watcher


def _goodbye(watcher: subprocess.Popen[str]) -> None:
    """At a normal exit: the watcher is told so, and reaped."""
    with contextlib.suppress(OSError, ValueError):
        assert watcher.stdin is not None
        watcher.stdin.write(_GOODBYE + "\n")
        watcher.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        watcher.wait(STOP_WAIT_S)

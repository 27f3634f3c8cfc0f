"""The engine's errors for callers: what a face did wrong or asked too early.

RavenError
├── ConfigError
│   ├── UnknownModel     a model id that is not configured
│   ├── UnknownMode      a mode id that is not declared (or none are)
│   └── NoModelConfigured  no model is set up at all (from the providers)
├── BadDirectory         a session directory that is not an existing absolute path
├── SessionNotFound      no session has that id (from the session store)
├── BadCursor            a session-list cursor this store did not give out
├── CursorExpired        an event-log cursor this session's log no longer continues
├── SessionClosed        the session was closed; load or resume it first
├── SessionBusy          a turn already runs in it, in this process or another
└── TurnStuck            a turn did not stop within the time it was given

Each face maps these once, to its protocol's codes.
"""

from __future__ import annotations

from pathlib import Path

from raven.config import ConfigError
from raven.errors import RavenError
from raven.providers import NoModelConfigured
from raven.sessions import BadCursor, SessionNotFound


class UnknownModel(ConfigError):
    def __init__(self, model_id: str, known: list[str]) -> None:
        super().__init__(f"unknown model {model_id!r}; models: {', '.join(known)}")
        self.model_id = model_id


class UnknownMode(ConfigError):
    def __init__(self, mode_id: str, known: list[str]) -> None:
        listed = ", ".join(known) if known else "none are declared in the config"
        super().__init__(f"unknown mode {mode_id!r}; modes: {listed}")
        self.mode_id = mode_id


class BadDirectory(RavenError):
    def __init__(self, cwd: str, problem: str) -> None:
        super().__init__(f"cwd must be an existing absolute directory; {cwd!r} {problem}")
        self.cwd = cwd


def session_directory(cwd: str | Path) -> Path:
    """`cwd` as a session's directory: absolute and existing, else `BadDirectory`."""
    path = cwd if isinstance(cwd, Path) else Path(cwd)
    if not path.is_absolute():
        raise BadDirectory(str(cwd), "is not absolute")
    if not path.is_dir():
        raise BadDirectory(str(cwd), "is not a directory")
    return path


class SessionClosed(RavenError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} is closed; load or resume it first")
        self.session_id = session_id


class SessionBusy(RavenError):
    """`pid` names the other Raven process whose turn holds the session, if it is not this
    one (`remote`: a process of another machine, a replica)."""

    def __init__(self, session_id: str, pid: int | None = None, remote: bool = False) -> None:
        machine = " on another machine" if remote else ""
        where = f" (in another Raven process, pid {pid}{machine})" if pid is not None else ""
        super().__init__(
            f"a turn is already running in session {session_id}{where}; wait for it or cancel it"
        )
        self.session_id = session_id
        self.pid = pid
        self.remote = remote


class CursorExpired(RavenError):
    """The log holds nothing after `cursor` any more (trimmed, another process's, or the
    transcript changed under it): read the whole session again (`snapshot`)."""

    def __init__(self, session_id: str, cursor: str) -> None:
        super().__init__(f"cursor {cursor!r} of session {session_id} has expired; read it again")
        self.session_id = session_id
        self.cursor = cursor


class TurnStuck(RavenError):
    def __init__(self, session_id: str, timeout_s: float) -> None:
        super().__init__(f"the turn in session {session_id} did not stop within {timeout_s:g}s")
        self.session_id = session_id


__all__ = [
    "BadCursor",
    "BadDirectory",
    "CursorExpired",
    "NoModelConfigured",
    "SessionBusy",
    "SessionClosed",
    "SessionNotFound",
    "TurnStuck",
    "UnknownMode",
    "UnknownModel",
    "session_directory",
]

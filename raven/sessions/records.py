"""What every session store hands out and raises: records, pages, hits, cursors, errors.

Pure values; no store, no I/O.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from raven.errors import RavenError
from raven.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    CompactionMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)

DEFAULT_PAGE_SIZE = 50
MAX_SHOWN_MATCHES = 10
MATCH_START, MATCH_END = "\x02", "\x03"
"""Around the words found, in search snippets."""
SESSION_ID_PREFIX = "ses_"
MAX_SEQ = 2**31 - 1
"""Past any message's number (they count from 1): a fork of a whole transcript copies to it."""


class SessionNotFound(RavenError):
    """No session has that id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id


class AmbiguousSession(RavenError):
    """A session id prefix that matches more than one session."""

    exit_code = 2

    def __init__(self, prefix: str, matches: list[str]) -> None:
        shown = ", ".join(matches[:MAX_SHOWN_MATCHES])
        more = "…" if len(matches) > MAX_SHOWN_MATCHES else ""
        super().__init__(f"{prefix!r} matches several sessions: {shown}{more}; give more of the id")
        self.matches = matches


class TurnElsewhere(RavenError):
    """Another live process runs a turn in the session (`remote`: on another machine)."""

    def __init__(self, session_id: str, pid: int, remote: bool = False) -> None:
        where = f"process {pid}" + (" on another machine" if remote else "")
        super().__init__(f"session {session_id} has a turn running in {where}")
        self.session_id = session_id
        self.pid = pid
        self.remote = remote


class TurnLost(RavenError):
    """This process no longer holds the session's claim: it lapsed (the replica could not
    renew it in time) and another one ended the turn."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id}: this turn's claim lapsed; another replica ended it"
        )
        self.session_id = session_id


class StoreUnavailable(RavenError):
    """The store cannot be opened or reached, or is not a Raven session store."""


class BadCursor(RavenError):
    """A list cursor that this store did not hand out."""


@dataclass(frozen=True)
class SessionRecord:
    id: str
    cwd: str
    title: str
    mode: str | None
    model: str | None
    face: str
    created_at: str
    updated_at: str
    closed: bool
    failure: str | None = None
    """The error the last turn ended with; None when it ended well (or none ran)."""
    parent: str | None = None
    """The session this one was forked from, if it was."""


@dataclass(frozen=True)
class SearchHit:
    record: SessionRecord
    snippet: str


@dataclass(frozen=True)
class Window:
    """What a live session keeps of its transcript: the messages from `start` (an index
    in the transcript) on, which the model sees with the newest compaction's summary."""

    start: int
    messages: list[Message]


@dataclass(frozen=True)
class SessionPage:
    sessions: list[SessionRecord]
    next_cursor: str | None


def now_iso() -> str:
    """The time now as stored: `2026-12-02T20:15:51.123456Z` (UTC, microseconds, sorted as
    text in time order)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def new_record(
    cwd: str,
    face: str,
    mode: str | None,
    model: str | None,
    session_id: str | None = None,
    parent: SessionRecord | None = None,
) -> SessionRecord:
    """A record for a session not stored yet; a fork of `parent` keeps its title."""
    stamp = now_iso()
    return SessionRecord(
        id=session_id or f"{SESSION_ID_PREFIX}{uuid.uuid4().hex}",
        cwd=cwd,
        title=parent.title if parent is not None else "",
        mode=mode,
        model=model,
        face=face,
        created_at=stamp,
        updated_at=stamp,
        closed=False,
        parent=parent.id if parent is not None else None,
    )


INDEXED_CHARS = 200_000
"""How much of each part of a message (its text, thought, content, parts, call arguments)
the word index takes: a long answer is found by its first 200,000 characters. Indexing
costs memory as it goes (SQLite's FTS5 about 14 bytes a character while it takes a
message in), and PostgreSQL refuses a message whose words fill more than 1 MB."""


def searchable_text(message: Message) -> str:
    """What the word index takes of a message: its text, thought and content, its parts'
    text and its tool calls' arguments, each cut at INDEXED_CHARS."""
    pieces: list[str] = []
    if isinstance(message, AssistantMessage):
        pieces += [message.text, message.thought]
        arguments = [json.dumps(c.arguments, ensure_ascii=False) for c in message.tool_calls]
        pieces.append(" ".join(arguments))
    elif isinstance(message, ToolResultMessage):
        pieces.append(message.content)
    elif isinstance(message, UserMessage):
        pieces.append(message.text)
    # A compaction's summary repeats what its messages say: a search finds them instead.
    return " ".join(piece[:INDEXED_CHARS] for piece in pieces if piece)


def search_words(text: str) -> list[str]:
    """The words a search looks for, each found whole (any case)."""
    return [w for w in re.findall(r"\w+", text) if w]


def like_pattern(query: str) -> str:
    """`query` as a LIKE pattern matching it anywhere, `%` and `_` literal (escape `\\`)."""
    return "%" + re.sub(r"([\\%_])", r"\\\1", query) + "%"


def encode_cursor(record: SessionRecord) -> str:
    raw = json.dumps([record.updated_at, record.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """(updated_at, id) of the last record of the page before; `BadCursor` if not ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, last_id = json.loads(raw)
        if isinstance(updated_at, str) and isinstance(last_id, str):
            return updated_at, last_id
    except (ValueError, TypeError):
        pass
    raise BadCursor(f"invalid cursor {cursor!r}")


def process_alive(pid: int | None) -> bool:
    """Whether process `pid` of this machine runs (None: no process)."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


COMPACTION_BODY = '{"role":"compaction"'
"""How a stored compaction's JSON begins (its role is its first field): a fork finds the
newest one it copies by it."""


def kept_from(body: str | None) -> int:
    """Where the window begins, by the newest compaction's stored body (None: none)."""
    if body is None:
        return 0
    message = MESSAGE_ADAPTER.validate_json(body)
    return message.kept_from if isinstance(message, CompactionMessage) else 0

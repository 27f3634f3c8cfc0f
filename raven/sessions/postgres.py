"""The PostgreSQL session store, which replicas share: records, transcripts, word search,
the sessions' event logs, turn claims as leases, and each running turn's inbox.

A claim names its holder (`raven.holders`) and lasts `leaseS` past its last renewal,
by the database's clock, so replicas on machines whose clocks disagree still agree on
it. Every change another replica must hear of is announced with NOTIFY, for `watch`:
on `raven_session_log` (the session id and its log's newest number) or
`raven_session_inbox` (the session id), and a task's change on `raven_task`
(`raven.sessions.postgres_tasks`: its id and version). Opens its connections on first
use; every wait on the server ends (`COMMAND_TIMEOUT_S`). Knows nothing of turns, tools or faces.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, NamedTuple

import asyncpg

from raven.holders import gone, on_this_machine, parse, this_holder
from raven.messages import MESSAGE_ADAPTER, CompactionMessage, Message
from raven.sessions.pg_connections import Connections
from raven.sessions.postgres_schema import NOW, migrate
from raven.sessions.postgres_tasks import TASK_CHANNEL, PostgresTasks
from raven.sessions.records import (
    COMPACTION_BODY,
    DEFAULT_PAGE_SIZE,
    INDEXED_CHARS,
    MAX_SEQ,
    MAX_SHOWN_MATCHES,
    SESSION_ID_PREFIX,
    AmbiguousSession,
    SearchHit,
    SessionNotFound,
    SessionPage,
    SessionRecord,
    StoreUnavailable,
    TurnElsewhere,
    TurnLost,
    Window,
    decode_cursor,
    encode_cursor,
    kept_from,
    like_pattern,
    new_record,
    now_iso,
    search_words,
    searchable_text,
)
from raven.sessions.store import InboxItem, LoggedRow, NewEvent, Watcher

if TYPE_CHECKING:
    from raven.config import SessionsConfig

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
POOL_SIZE = 10
MAX_LOGGED_EVENTS = 10_000
"""Events a session's log keeps; the oldest whole turns leave first."""
TRIM_EVERY = 1_000
"""Events between two trims of a session's log (so it holds up to this many more)."""
LOG_CHANNEL, INBOX_CHANNEL = "raven_session_log", "raven_session_inbox"
RECONNECT_S = 1.0
"""Between attempts to listen again after the listening connection was lost."""
_UNREACHABLE = (
    OSError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a statement sent as the server dropped the connection
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
)


class _Outage(logging.Filter):
    """asyncpg's pool logs every retry of a server it lost with a full traceback (a few a
    second while it is down): the first is kept, as one line, and the rest until the
    server is back (`_listen` says so once) are dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.said:
            return False
        self.said = True
        if record.exc_info:
            record.msg = f"{record.getMessage()}: {record.exc_info[1]}"
            record.args, record.exc_info, record.exc_text = (), None, None
        return True


_outage = _Outage()
logging.getLogger("asyncpg.pool").addFilter(_outage)
_SELECT = (
    "SELECT id, cwd, title, mode, model, face, created_at, updated_at, closed, failure, parent"
    " FROM raven_sessions"
)
_APPEND = (
    # Each message's number is the session's version once it counts the message; with
    # $6, the last is a compaction, which the session's window starts from.
    "WITH s AS (UPDATE raven_sessions SET updated_at = $2, title = COALESCE($3, title),"
    " version = version + cardinality($4::text[]), compacted_at = CASE WHEN $6"
    " THEN version + cardinality($4::text[]) ELSE compacted_at END"
    " WHERE id = $1 RETURNING version)"
    " INSERT INTO raven_messages (session_id, seq, body, created_at, search_text)"
    " SELECT $1, s.version - cardinality($4::text[]) + t.n, t.b, $2, t.w"
    " FROM s, unnest($4::text[], $5::text[]) WITH ORDINALITY AS t(b, w, n)"
)


def _new_events(first: int, only_if: str = "TRUE") -> str:
    """The CTE inserting the rows whose columns are the parameters from `$first` on,
    numbered up to the head `s` returns (when `only_if` holds)."""
    v, k, b = (f"${n}" for n in range(first, first + 3))
    return (
        "ins AS (INSERT INTO raven_session_events (session_id, seq, version, kind, body)"
        f" SELECT $1, s.log_seq - cardinality({v}::int[]) + t.n, t.v, t.k, t.b"
        f" FROM s, unnest({v}::int[], {k}::text[], {b}::text[]) WITH ORDINALITY AS t(v, k, b, n)"
        f" WHERE {only_if})"
    )


_NOTIFY_HEAD = f"SELECT log_seq, pg_notify('{LOG_CHANNEL}', $1 || ' ' || log_seq) FROM s"
_LOG_APPEND = (
    "WITH s AS (UPDATE raven_sessions SET log_seq = log_seq + cardinality($3::int[])"
    " WHERE id = $1 AND ($2::text IS NULL OR turn_holder = $2) RETURNING log_seq), "
    + _new_events(3)
    + " "
    + _NOTIFY_HEAD
)
_END_TURN = (
    # Only while this process holds the claim: the turn's last events are appended and the
    # claim released. The failure is kept unless another process holds the session. What
    # was sent to the turn goes with it. Answers the log's head and whether it was held.
    "WITH o AS (SELECT turn_holder IS NOT DISTINCT FROM $2 AS held FROM raven_sessions"
    " WHERE id = $1 FOR UPDATE),"
    " s AS (UPDATE raven_sessions SET"
    " log_seq = log_seq + CASE WHEN (SELECT held FROM o) THEN cardinality($4::int[]) ELSE 0 END,"
    " failure = CASE WHEN turn_holder IS NULL OR turn_holder = $2 THEN $3 ELSE failure END,"
    " turn_until = CASE WHEN turn_holder = $2 THEN NULL ELSE turn_until END,"
    " turn_holder = CASE WHEN turn_holder = $2 THEN NULL ELSE turn_holder END"
    " WHERE id = $1 RETURNING log_seq), "
    + _new_events(4, only_if="(SELECT held FROM o)")
    + ", inbox AS (DELETE FROM raven_session_inbox WHERE session_id = $1) "
    + f"SELECT log_seq, (SELECT held FROM o) AS held, pg_notify('{LOG_CHANNEL}',"
    " $1 || ' ' || log_seq) FROM s"
)
_TRIM = (
    # The oldest whole turns leave the log while it holds more than $2 events; the
    # newest turn always stays.
    "DELETE FROM raven_session_events WHERE session_id = $1 AND seq < COALESCE("
    " (SELECT min(seq) FROM raven_session_events WHERE session_id = $1"
    "  AND kind = 'TurnStarted' AND seq > (SELECT log_seq FROM raven_sessions"
    "  WHERE id = $1) - $2),"
    " (SELECT max(seq) FROM raven_session_events WHERE session_id = $1"
    "  AND kind = 'TurnStarted'), 0)"
)
_EXISTS = "SELECT 1 FROM raven_sessions WHERE id = $1"
_HEADLINE = (
    "StartSel=\x02, StopSel=\x03, MaxWords=12, MinWords=4, ShortWord=0, MaxFragments=1,"
    " FragmentDelimiter=…"
)


class PostgresSessions(PostgresTasks):
    shared = True

    def __init__(self, settings: SessionsConfig) -> None:
        assert settings.url is not None
        self._dsn = settings.url
        self.lease_s = settings.lease_s
        self.listening = settings.listen
        self.poll_s = settings.poll_s
        self._me = this_holder()
        self._pool: Connections | None = None
        self._opening = asyncio.Lock()
        self._order: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per session: the lock that keeps its appends in call order, and its users."""
        self._staged: dict[str, list[_Staged]] = {}
        """Per session: messages appended `soon`, for the next append's statement."""
        self._writing_staged: set[asyncio.Task[None]] = set()
        """Writes of staged messages sent at a step's end (awaited by `aclose`)."""
        self._created: dict[str, str] = {}
        """Sessions this process created and neither wrote nor opened the log of since:
        their log's epoch. Their log is empty: no other replica knows the new id before
        `create` returns it (and an event it adds later is heard as any other is)."""
        self._listener: asyncio.Task[None] | None = None
        self._closed = False

    # -- connections ---------------------------------------------------------------------

    async def _connect(self) -> Connections:
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    if self._closed:
                        raise StoreUnavailable("the session store is closed")
                    pool = Connections(self._dsn, POOL_SIZE, CONNECT_TIMEOUT_S, COMMAND_TIMEOUT_S)
                    try:
                        conn = await pool.acquire(CONNECT_TIMEOUT_S)
                        try:
                            await migrate(conn)
                        finally:
                            pool.release(conn, reuse=True)
                    except (*_UNREACHABLE, TimeoutError, asyncpg.PostgresError) as exc:
                        raise StoreUnavailable(
                            f"cannot open the session store at {_safe(self._dsn)}: {exc}"
                        ) from None
                    self._pool = pool
        return self._pool

    @contextlib.asynccontextmanager
    async def _conn(self, transaction: bool = False) -> AsyncIterator[asyncpg.Connection]:
        """A connection of the pool for the block; a block left by a cancel or a timeout
        (a statement perhaps half-done) closes it."""
        pool = await self._connect()
        try:
            conn = await pool.acquire(COMMAND_TIMEOUT_S)
        except (*_UNREACHABLE, TimeoutError) as exc:
            raise StoreUnavailable(f"the session store is unreachable: {exc}") from None
        reuse = False
        try:
            if transaction:
                async with conn.transaction():
                    yield conn
            else:
                yield conn
            reuse = True
        except (*_UNREACHABLE, TimeoutError) as exc:
            raise StoreUnavailable(f"the session store is unreachable: {exc}") from None
        except Exception:
            reuse = True  # a statement's error, or the caller's own: the connection is sound
            raise
        finally:
            pool.release(conn, reuse)

    async def aclose(self) -> None:
        for session_id in list(self._staged):
            self._write_staged_soon(session_id)
        if self._writing_staged:
            await asyncio.wait(self._writing_staged, timeout=COMMAND_TIMEOUT_S)
        self._closed = True
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        if self._pool is not None:
            await self._pool.aclose(COMMAND_TIMEOUT_S)
            self._pool = None

    # -- sessions and transcripts --------------------------------------------------------

    async def create(
        self,
        cwd: str,
        face: str,
        mode: str | None = None,
        model: str | None = None,
        session_id: str | None = None,
        claimed: bool = False,
    ) -> SessionRecord:
        record = new_record(cwd, face, mode, model, session_id)
        claim = (self._me, self.lease_s) if claimed else None
        async with self._conn() as conn:
            self._created[record.id] = await _insert_session(conn, record, claim=claim)
        return record

    async def get_or_create(
        self, session_id: str, cwd: str, face: str, mode: str | None, model: str | None
    ) -> tuple[SessionRecord, Window]:
        async with self._conn() as conn:
            await _insert_session(conn, new_record(cwd, face, mode, model, session_id), True)
        return await self.get(session_id), await self.window(session_id)

    async def fork(
        self, session_id: str, cwd: str, face: str, upto: int | None = None
    ) -> SessionRecord:
        parent = await self.get(session_id)
        record = new_record(cwd, face, parent.mode, parent.model, parent=parent)
        async with self._conn(transaction=True) as conn:
            await _insert_session(conn, record)
            await conn.execute(
                "WITH copied AS (INSERT INTO raven_messages"
                " (session_id, seq, body, created_at, search_text)"
                " SELECT $1, seq, body, created_at, search_text FROM raven_messages"
                " WHERE session_id = $2 AND seq <= $3 RETURNING 1)"
                " UPDATE raven_sessions SET version = (SELECT count(*) FROM copied),"
                " compacted_at = (SELECT COALESCE(max(seq), 0) FROM raven_messages"
                f" WHERE session_id = $2 AND seq <= $3 AND body LIKE '{COMPACTION_BODY}%')"
                " WHERE id = $1",
                record.id,
                parent.id,
                upto if upto is not None else MAX_SEQ,
            )
        return record

    async def get(self, session_id: str) -> SessionRecord:
        async with self._conn() as conn:
            row = await conn.fetchrow(_SELECT + " WHERE id = $1", session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return _record(row)

    async def resolve(self, prefix: str) -> str:
        async with self._conn() as conn:
            for candidate in dict.fromkeys((prefix, SESSION_ID_PREFIX + prefix)):
                if await conn.fetchval("SELECT 1 FROM raven_sessions WHERE id = $1", candidate):
                    return candidate
                rows = await conn.fetch(
                    "SELECT id FROM raven_sessions WHERE left(id, length($1)) = $1"
                    " ORDER BY updated_at DESC LIMIT $2",
                    candidate,
                    MAX_SHOWN_MATCHES + 1,
                )
                if len(rows) == 1:
                    return str(rows[0]["id"])
                if rows:
                    raise AmbiguousSession(prefix, [str(r["id"]) for r in rows])
        raise SessionNotFound(prefix)

    async def page(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        query: str | None = None,
        not_face: str | None = None,
    ) -> SessionPage:
        where: list[str] = []
        params: list[object] = []

        def param(value: object) -> str:
            params.append(value)
            return f"${len(params)}"

        if cwd is not None:
            where.append(f"cwd = {param(cwd)}")
        if not_face is not None:
            where.append(f"face <> {param(not_face)}")
        if query:
            pattern = param(like_pattern(query))
            where.append(f"(title ILIKE {pattern} ESCAPE '\\' OR cwd ILIKE {pattern} ESCAPE '\\')")
        if cursor:
            updated_at, last_id = decode_cursor(cursor)
            stamp, after = param(updated_at), param(last_id)
            where.append(f"(updated_at < {stamp} OR (updated_at = {stamp} AND id < {after}))")
        sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "")
        sql += f" ORDER BY updated_at DESC, id DESC LIMIT {param(limit + 1)}"
        async with self._conn() as conn:
            rows = await conn.fetch(sql, *params)
        records = [_record(r) for r in rows[:limit]]
        more = len(rows) > limit
        return SessionPage(records, encode_cursor(records[-1]) if more and records else None)

    async def append(
        self,
        session_id: str,
        message: Message,
        title: str | None = None,
        create: SessionRecord | None = None,
        soon: bool = False,
        claimed: bool = False,
    ) -> None:
        body = MESSAGE_ADAPTER.dump_json(message).decode()
        compaction = isinstance(message, CompactionMessage)
        staged = _Staged(body, _searchable(message), title, compaction)
        if (
            soon and create is None and not compaction
        ):  # the next append's statement, or one at the step's end
            waiting = self._staged.setdefault(session_id, [])
            waiting.append(staged)
            if len(waiting) == 1:
                asyncio.get_running_loop().call_soon(self._write_staged_soon, session_id)
            return
        await self._write(session_id, [staged], create, claimed)

    async def _write(
        self,
        session_id: str,
        messages: list[_Staged],
        create: SessionRecord | None = None,
        claimed: bool = False,
    ) -> None:
        """Append what was staged for the session, then `messages`, in one statement."""
        async with self._in_order(session_id):
            messages = [*self._staged.pop(session_id, []), *messages]
            if not messages:
                return  # the staged ones went with an append before this
            titles = [m.title for m in messages if m.title is not None]
            args = (
                session_id,
                now_iso(),
                titles[-1] if titles else None,
                [m.body for m in messages],
                [m.search for m in messages],
                messages[-1].compaction,
            )
            async with self._conn(transaction=create is not None) as conn:
                if create is not None:
                    claim = (self._me, self.lease_s) if claimed else None
                    await _insert_session(conn, create, claim=claim)
                added = await conn.execute(_APPEND, *args)
        if added.endswith(" 0"):
            raise SessionNotFound(session_id)

    def _write_staged_soon(self, session_id: str) -> None:
        """The event loop's step that staged a message is over: store it now, unless an
        append took it along already."""
        if session_id in self._staged:
            task = asyncio.create_task(self._write_staged(session_id))
            self._writing_staged.add(task)
            task.add_done_callback(self._writing_staged.discard)

    async def _write_staged(self, session_id: str) -> None:
        try:
            await self._write(session_id, [])
        except Exception as exc:  # nobody awaits it: the person sees it in the log
            log.error("session %s: a message could not be stored: %s", session_id, exc)

    async def _staged_written(self, session_id: str) -> None:
        """Before a write that must come after the session's messages (its turn's end):
        what is staged is stored, and a write of staged messages under way has ended."""
        if session_id in self._staged or session_id in self._order:
            await self._write(session_id, [])

    @contextlib.asynccontextmanager
    async def _in_order(self, session_id: str) -> AsyncIterator[None]:
        """Appends to one session, one at a time, in the order they were called."""
        lock, users = self._order.get(session_id, (asyncio.Lock(), 0))
        self._order[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._order[session_id]
            if users == 1:
                del self._order[session_id]
            else:
                self._order[session_id] = (lock, users - 1)

    async def messages(
        self, session_id: str, last: int | None = None, upto: int | None = None
    ) -> list[Message]:
        async with self._conn() as conn:
            if not await conn.fetchval("SELECT 1 FROM raven_sessions WHERE id = $1", session_id):
                raise SessionNotFound(session_id)
            rows = await conn.fetch(
                "SELECT body FROM raven_messages WHERE session_id = $1 AND seq <= $2"
                " ORDER BY seq DESC" + (" LIMIT $3" if last is not None else ""),
                session_id,
                MAX_SEQ if upto is None else upto,
                *([last] if last is not None else []),
            )
        return [MESSAGE_ADAPTER.validate_json(r["body"]) for r in reversed(rows)]

    async def window(self, session_id: str) -> Window:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT m.body FROM raven_sessions s LEFT JOIN raven_messages m"
                " ON m.session_id = s.id AND m.seq = s.compacted_at WHERE s.id = $1",
                session_id,
            )
            if row is None:
                raise SessionNotFound(session_id)
            start = kept_from(row["body"])
            rows = await conn.fetch(
                "SELECT body FROM raven_messages WHERE session_id = $1 AND seq > $2 ORDER BY seq",
                session_id,
                start,
            )
        return Window(start, [MESSAGE_ADAPTER.validate_json(r["body"]) for r in rows])

    async def version(self, session_id: str) -> int:
        async with self._conn() as conn:
            version = await conn.fetchval(
                "SELECT version FROM raven_sessions WHERE id = $1", session_id
            )
        if version is None:
            raise SessionNotFound(session_id)
        return int(version)

    async def update(
        self,
        session_id: str,
        *,
        title: str | None = None,
        mode: str | None = None,
        model: str | None = None,
        closed: bool | None = None,
        guarded: bool = False,
    ) -> SessionRecord:
        changes = {"title": title, "mode": mode, "model": model, "closed": closed}
        sets = {k: v for k, v in changes.items() if v is not None}
        async with self._conn(transaction=True) as conn:
            if await self._check_turn(conn, session_id, guarded) is None:
                raise SessionNotFound(session_id)
            if sets:
                assignments = ", ".join(f"{k} = ${i}" for i, k in enumerate(sets, start=3))
                await conn.execute(
                    f"UPDATE raven_sessions SET {assignments}, updated_at = $2 WHERE id = $1",
                    session_id,
                    now_iso(),
                    *sets.values(),
                )
            row = await conn.fetchrow(_SELECT + " WHERE id = $1", session_id)
        return _record(row)

    async def delete(self, session_id: str, guarded: bool = False) -> bool:
        self._created.pop(session_id, None)
        self._staged.pop(session_id, None)
        async with self._conn(transaction=True) as conn:
            await self._check_turn(conn, session_id, guarded)
            head = await conn.fetchval(
                "DELETE FROM raven_sessions WHERE id = $1 RETURNING log_seq", session_id
            )
            if head is None:
                return False
            # Replicas reading its log past its end learn it is gone.
            await conn.execute("SELECT pg_notify($1, $2)", LOG_CHANNEL, f"{session_id} {head + 1}")
        return True

    async def search(self, text: str, cwd: str | None = None, limit: int = 20) -> list[SearchHit]:
        words = search_words(text)
        if not words:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT best.session_id, ts_headline('simple', best.search_text, q, $4) AS snippet"
                " FROM (SELECT DISTINCT ON (m.session_id) m.session_id, m.search_text,"
                " ts_rank(m.words, q) AS rank"
                " FROM raven_messages m JOIN raven_sessions s ON s.id = m.session_id,"
                " plainto_tsquery('simple', $1) q"
                " WHERE m.words @@ q AND ($2::text IS NULL OR s.cwd = $2)"
                " ORDER BY m.session_id, rank DESC) best, plainto_tsquery('simple', $1) q"
                " ORDER BY best.rank DESC LIMIT $3",
                " ".join(words),
                cwd,
                limit,
                _HEADLINE,
            )
            found = [(r["session_id"], " ".join(r["snippet"].split())) for r in rows]
            records = {
                r["id"]: _record(r)
                for r in await conn.fetch(
                    _SELECT + " WHERE id = ANY($1::text[])", [sid for sid, _ in found]
                )
            }
        return [SearchHit(records[sid], snippet) for sid, snippet in found if sid in records]

    # -- claims ----------------------------------------------------------------------------

    async def claim_turn(self, session_id: str) -> int:
        claim = (
            f"UPDATE raven_sessions SET turn_holder = $2, turn_until = {NOW} + $3"
            " WHERE id = $1{} RETURNING version"
        )
        async with self._conn() as conn:
            # Most claims find the session free: one statement. Otherwise the holder is
            # judged with its row locked.
            free = " AND (turn_holder IS NULL OR turn_holder = $2)"
            version = await conn.fetchval(claim.format(free), session_id, self._me, self.lease_s)
            if version is not None:
                return int(version)
            async with conn.transaction():
                if await self._check_turn(conn, session_id, guarded=True) is None:
                    raise SessionNotFound(session_id)
                version = await conn.fetchval(claim.format(""), session_id, self._me, self.lease_s)
        return int(version)

    async def _check_turn(
        self, conn: asyncpg.Connection, session_id: str, guarded: bool
    ) -> int | None:
        """The session's version, its row locked (None when there is no such session);
        with `guarded`, `TurnElsewhere` while another live process holds it."""
        row = await conn.fetchrow(
            f"SELECT version, turn_holder, turn_until >= {NOW} AS held"
            " FROM raven_sessions WHERE id = $1 FOR UPDATE",
            session_id,
        )
        if row is None:
            return None
        holder = row["turn_holder"]
        if guarded and holder is not None and holder != self._me and row["held"]:
            named = parse(holder)
            if not gone(named):
                pid = named.get("pid")
                raise TurnElsewhere(
                    session_id, pid if isinstance(pid, int) else 0, not on_this_machine(named)
                )
        return int(row["version"])

    async def renew_claims(self, session_ids: list[str]) -> list[str]:
        if not session_ids:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"UPDATE raven_sessions SET turn_until = {NOW} + $3"
                " WHERE id = ANY($1::text[]) AND turn_holder = $2 RETURNING id",
                session_ids,
                self._me,
                self.lease_s,
            )
        return [r["id"] for r in rows]

    async def release_turn(self, session_id: str, failure: str | None = None) -> None:
        await self.end_turn(session_id, failure, [])

    async def end_turn(
        self, session_id: str, failure: str | None, logged: list[NewEvent]
    ) -> int | None:
        self._created.pop(session_id, None)
        await self._staged_written(session_id)
        async with self._conn() as conn:
            row = await conn.fetchrow(_END_TURN, session_id, self._me, failure, *_columns(logged))
            if row is None or not row["held"] or not logged:
                return None  # another process ended the turn: what it said is not stored
            head = int(row["log_seq"])
            if _crossed(head, len(logged), TRIM_EVERY):
                await conn.execute(_TRIM, session_id, MAX_LOGGED_EVENTS)
        return head - len(logged) + 1

    async def lapsed(self) -> list[str]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT id, turn_holder, turn_until < {NOW} AS expired FROM raven_sessions"
                " WHERE turn_holder IS NOT NULL"
            )
        return [
            r["id"]
            for r in rows
            if r["turn_holder"] != self._me and (r["expired"] or gone(parse(r["turn_holder"])))
        ]

    # -- the event log ---------------------------------------------------------------------

    async def log_open(self, session_id: str) -> tuple[str, int, list[LoggedRow]]:
        epoch = self._created.pop(session_id, None)
        if epoch is not None:  # created here a moment ago: nothing to read
            return epoch, 0, []
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT s.log_epoch, s.log_seq, e.seq, e.version, e.body FROM raven_sessions s"
                " LEFT JOIN raven_session_events e ON e.session_id = s.id WHERE s.id = $1"
                " ORDER BY e.seq",
                session_id,
            )
        if not rows:
            raise SessionNotFound(session_id)
        logged = [
            LoggedRow(r["seq"], r["version"], r["body"]) for r in rows if r["seq"] is not None
        ]
        return str(rows[0]["log_epoch"]), int(rows[0]["log_seq"]), logged

    async def log_since(self, session_id: str, after: int) -> list[LoggedRow]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT seq, version, body FROM raven_session_events"
                " WHERE session_id = $1 AND seq > $2 ORDER BY seq",
                session_id,
                after,
            )
            if not rows and not await conn.fetchval(
                "SELECT 1 FROM raven_sessions WHERE id = $1", session_id
            ):
                raise SessionNotFound(session_id)
        return [LoggedRow(r["seq"], r["version"], r["body"]) for r in rows]

    async def log_append(self, session_id: str, rows: list[NewEvent], fenced: bool) -> int:
        holder = self._me if fenced else None
        self._created.pop(session_id, None)
        async with self._conn() as conn:
            head = await conn.fetchval(_LOG_APPEND, session_id, holder, *_columns(rows))
            if head is None:
                exists = await conn.fetchval(
                    "SELECT 1 FROM raven_sessions WHERE id = $1", session_id
                )
                raise TurnLost(session_id) if exists else SessionNotFound(session_id)
        return int(head) - len(rows) + 1

    # -- the inbox ---------------------------------------------------------------------------

    async def send(self, session_id: str, kind: str, text: str = "") -> bool:
        async with self._conn(transaction=True) as conn:
            sent = await conn.execute(
                "INSERT INTO raven_session_inbox (session_id, kind, text)"
                " SELECT id, $2, $3 FROM raven_sessions WHERE id = $1 AND turn_holder IS NOT NULL",
                session_id,
                kind,
                text,
            )
            if sent.endswith(" 0"):
                return False
            await conn.execute("SELECT pg_notify($1, $2)", INBOX_CHANNEL, session_id)
        return True

    async def take_inbox(self, session_ids: list[str]) -> list[InboxItem]:
        if not session_ids:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                "DELETE FROM raven_session_inbox WHERE session_id = ANY($1::text[])"
                " RETURNING id, session_id, kind, text",
                session_ids,
            )
        return [InboxItem(r["session_id"], r["kind"], r["text"]) for r in sorted(rows, key=_by_id)]

    # -- hearing of changes ------------------------------------------------------------------

    async def watch(self, watcher: Watcher) -> None:
        """Start listening (with `listening`), and return once the first attempt is made."""
        if self.listening and self._listener is None:
            await self._connect()
            ready = asyncio.get_running_loop().create_future()
            self._listener = asyncio.create_task(
                self._listen(watcher, ready), name="sessions:listen"
            )
            await ready

    async def _listen(self, watcher: Watcher, ready: asyncio.Future[None]) -> None:
        """Listen until closed, again after every lost connection (then `missed`)."""

        def heard_log(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            session_id, _, head = payload.rpartition(" ")
            watcher.log_changed(session_id, int(head))

        def heard_inbox(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            watcher.inbox_changed(payload)

        def heard_task(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            task_id, _, version = payload.rpartition(" ")
            watcher.task_changed(task_id, int(version))

        while not self._closed:
            lost = asyncio.Event()
            try:
                conn = await asyncpg.connect(self._dsn, timeout=CONNECT_TIMEOUT_S)
            except (*_UNREACHABLE, asyncpg.PostgresError, TimeoutError) as exc:
                log.warning("cannot listen to the session store (%s); trying again", exc)
                if not ready.done():
                    ready.set_result(None)
                await asyncio.sleep(RECONNECT_S)
                continue
            try:
                conn.add_termination_listener(functools.partial(_set, lost))
                await conn.add_listener(LOG_CHANNEL, heard_log)
                await conn.add_listener(INBOX_CHANNEL, heard_inbox)
                await conn.add_listener(TASK_CHANNEL, heard_task)
                if ready.done():
                    watcher.missed()
                    log.warning("the session store can be reached again")
                    _outage.said = False
                else:
                    ready.set_result(None)
                await lost.wait()
                log.warning("the session store's listening connection was lost; listening again")
            except _UNREACHABLE as exc:
                log.warning("listening to the session store failed (%s); trying again", exc)
            finally:
                with contextlib.suppress(*_UNREACHABLE, TimeoutError):
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await conn.close()
            await asyncio.sleep(RECONNECT_S)


def _columns(rows: list[NewEvent]) -> tuple[list[int], list[str], list[str]]:
    return [r.version for r in rows], [r.kind for r in rows], [r.body for r in rows]


def _crossed(head: int, added: int, every: int) -> bool:
    """The log's numbers passed a multiple of `every` with the `added` newest."""
    return head // every != (head - added) // every


async def _insert_session(
    conn: asyncpg.Connection,
    record: SessionRecord,
    if_new: bool = False,
    claim: tuple[str, float] | None = None,
) -> str:
    """Insert the session (`claim`: claimed by that holder for that lease); returns its
    log's epoch."""
    epoch = secrets.token_hex(4)
    holder, lease_s = claim if claim is not None else (None, None)
    await conn.execute(
        "INSERT INTO raven_sessions (id, cwd, title, mode, model, face, created_at,"
        " updated_at, parent, log_epoch, turn_holder, turn_until)"
        f" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, {NOW} + $12)"
        + (" ON CONFLICT (id) DO NOTHING" if if_new else ""),
        record.id,
        record.cwd,
        record.title,
        record.mode,
        record.model,
        record.face,
        record.created_at,
        record.updated_at,
        record.parent,
        epoch,
        holder,
        lease_s,
    )
    return epoch


def _record(row: Any) -> SessionRecord:
    return SessionRecord(
        id=row["id"],
        cwd=row["cwd"],
        title=row["title"],
        mode=row["mode"],
        model=row["model"],
        face=row["face"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        closed=bool(row["closed"]),
        failure=row["failure"],
        parent=row["parent"],
    )


class _Staged(NamedTuple):
    """A message to append: its JSON, its searchable words, the title it brings."""

    body: str
    search: str
    title: str | None
    compaction: bool = False


def _searchable(message: Message) -> str:
    """The words of a message that search finds (`searchable_text`), as words alone
    (PostgreSQL's parser would keep `notes.txt` whole; SQLite's finds `notes`)."""
    return " ".join(search_words(searchable_text(message)[:INDEXED_CHARS]))


def _set(event: asyncio.Event, *_: Any) -> None:
    event.set()


def _by_id(row: Any) -> int:
    return int(row["id"])


def _safe(dsn: str) -> str:
    """The URL without its password, for messages."""
    scheme, sep, rest = dsn.partition("://")
    credentials, at, place = rest.rpartition("@")
    if not at:
        return dsn
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}@{place}"

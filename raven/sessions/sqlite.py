"""The SQLite session store: records, transcripts, paging. One writer at a time, any process.

`SqliteStore` is synchronous and thread-safe; `SqliteSessions` is the same store as the
engine uses every store (`raven.sessions.store.Sessions`): each call awaited, none
blocking the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from raven.messages import MESSAGE_ADAPTER, CompactionMessage, Message
from raven.private_files import private_file
from raven.sessions.bodies import body_pieces, is_long
from raven.sessions.migrations import index_pending, migrate
from raven.sessions.records import (
    COMPACTION_BODY,
    DEFAULT_PAGE_SIZE,
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
    Window,
    decode_cursor,
    encode_cursor,
    kept_from,
    like_pattern,
    new_record,
    now_iso,
    process_alive,
    search_words,
    searchable_text,
)
from raven.sessions.sqlite_tasks import SqliteTasks
from raven.sessions.worker import StoreWorker

T = TypeVar("T")
log = logging.getLogger(__name__)
BUSY_TIMEOUT_MS = 10_000
CHECKPOINT_EVERY = 256
"""Commits between WAL checkpoints, which run on a thread of their own, never on an event
loop (the store's thread first indexes the words of the messages written since the last
one, see `index_pending`).

A commit writes about 15 pages, so the log stays under about 16 MB; fewer, larger
checkpoints copy the pages every commit touches (the session row, the index) once, and
flush to disk less often (bench/a2a.py: 10 % more tasks a second at one client than
checkpoints every 64 commits, p99 6 ms instead of 8)."""
_LOOP_WRITES = frozenset(
    {"create", "append", "claim_turn", "release_turn", "update", "_task_save", "_delivery_change"}
)
"""Small writes `call` runs on the caller's own thread when the store is free at once."""


_FULL, _CORRUPT, _NOTADB, _IOERR = (
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_CORRUPT,
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_IOERR,
)


def store_failure(exc: sqlite3.Error, path: Path, doing: str) -> Exception:
    """What a failure of the database file itself means to the person, as a
    `StoreUnavailable` naming the file (a full disk, a damaged file, an I/O error);
    `exc` itself for anything else (a bug, to be logged as one)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == _FULL or (code == _IOERR and _full(path)):  # SQLite says I/O for some
        return StoreUnavailable(
            f"the disk holding the session store {path} is full; free some space there "
            "(what was stored before is kept)"
        )
    if code in (_CORRUPT, _NOTADB):
        return StoreUnavailable(
            f"{doing} {path}: it is damaged ({exc}); move it aside to start a new one, "
            "or put back a copy"
        )
    if code == _IOERR:
        return StoreUnavailable(f"{doing} {path}: the disk failed to read or write it ({exc})")
    if doing.startswith("cannot open"):  # whatever it is, the store is not there to use
        return StoreUnavailable(f"{doing} {path}: {exc}")
    return exc


def _full(path: Path) -> bool:
    """No room left beside the store (less than a few pages)."""
    try:
        return shutil.disk_usage(path.parent).free < 64 * 1024
    except OSError:
        return False


class SqliteStore:
    """Thread-safe access to one raven.db; each write commits before returning.

    Async callers use `call`, which runs a method on the store's own thread.
    """

    def __init__(self, path: Path) -> None:
        self._lock = threading.RLock()
        self._hasty = False
        """The connection's busy timeout is 0 (an inline write set it, see `_inline`);
        `_held` makes it wait again for anything else."""
        self._staged = False
        """A staged write's transaction is open (`stage`): the loop's thread holds `_lock`
        until the next write there commits it, or the loop's step ends."""
        self._grouped: str | None = None
        """While a transaction is open for several writes, how a write joins it: "savepoint"
        (`group`: each write stays all-or-nothing), or "" (the one call `_inline` runs,
        all-or-nothing as a whole)."""
        try:
            private_file(path)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA wal_autocheckpoint = 0")  # see `_grouping`
            self._db.create_function("raven_handed", 0, self._handed)
            with self._lock:
                migrate(self._db)
        except sqlite3.Error as exc:
            raise store_failure(exc, path, "cannot open the session store") from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the session store {path}: {exc}") from exc
        self._commits = 0
        self._handing: str | None = None
        """A message's body, handed to the insert that stores it by `raven_handed()`."""
        self._worker = StoreWorker(group=self.group)
        self._path = path
        self._checkpointer = StoreWorker(name="raven-checkpoint")
        self._checkpoints: sqlite3.Connection | None = None
        """The connection checkpoints run on (made at the first), beside `_db`'s writes."""
        self._checkpoint_waits = False
        """A checkpoint waits for `_lock` (its second pass): inline writes leave their work
        to the store's thread meanwhile. The loop's thread, taking the lock back the moment
        it lets it go, would keep it from the checkpoint while writes went on, and the log
        would grow all that time."""

    async def call(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `method(*args, **kwargs)` (a method of this store) without blocking the loop.

        A small write runs right here when nothing waits for the store's thread and the
        database can be written at once (no thread hop; committed before this returns,
        in the order calls were made). Anything else goes to the store's thread, which
        waits for other processes' writes and commits in groups; so do writes once an
        upkeep is due, which the thread does first (back-to-back writes here could
        otherwise keep it from the lock and the log would grow).
        """
        return await self._call(functools.partial(method, *args, **kwargs), method, stage=False)

    async def stage(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call`, for a write whose commit may wait a moment (group commit): run inline, it
        leaves its transaction open, the next write on this thread joins it and commits
        both; else it commits as the event loop's current step ends, before any task woken
        after it runs. For a write nobody hears of before then.
        """
        return await self._call(functools.partial(method, *args, **kwargs), method, stage=True)

    async def _call(self, call: Callable[[], T], method: Callable[..., T], stage: bool) -> T:
        due = self._commits >= CHECKPOINT_EVERY
        try:
            if method.__name__ in _LOOP_WRITES and self._worker.idle and not due:
                done, result = self._inline(call, stage)
                if done:
                    return result  # type: ignore[return-value]
            return await self._worker.call(call)
        except sqlite3.Error as exc:
            failure = store_failure(exc, self._path, "the session store failed")
            if failure is exc:
                raise
            raise failure from exc

    def close(self) -> None:
        """Finish queued calls, index the words of new messages, and close."""
        self._commit_staged()
        self._worker.stop()
        self._checkpointer.stop()
        self._upkeep(wait=True)
        with self.reading():
            self._db.close()
        if self._checkpoints is not None:
            self._checkpoints.close()

    @contextmanager
    def group(self) -> Iterator[None]:
        """One transaction for several writes (group commit); each stays all-or-nothing."""
        with self.reading():
            self._db.execute("BEGIN IMMEDIATE")
            with self._grouping("savepoint"):
                yield
        if self._commits >= CHECKPOINT_EVERY:
            self._upkeep()

    def _upkeep(self, wait: bool = False) -> None:
        """Index the words of new messages (on the store's thread, or on closing), then
        checkpoint the log on a thread of its own (here, with `wait`).

        A failure (another process holding the write lock for long) is logged and tried
        again after the next `CHECKPOINT_EVERY` commits; the commits made stay made.
        """
        try:
            self._index_pending()
        except sqlite3.Error as exc:
            failure = store_failure(exc, self._path, "session store upkeep failed for")
            if failure is exc:
                log.warning("session store upkeep failed; tried again later", exc_info=True)
            else:  # said plainly: the person acts on it, no traceback helps
                log.warning("%s", failure)
        finally:
            self._commits = 0
        if wait:
            self._checkpoint()
        else:
            self._checkpointer.post(self._checkpoint)

    def _checkpoint(self) -> None:
        """Copy the log into the database.

        A checkpoint copies the log and flushes both files to disk: 10 ms and more. Most of
        it runs on a connection of its own without holding the store, so writes (and the
        store's thread) go on meanwhile, as WAL mode allows; then a second one, holding the
        store, copies what they wrote (1 to 3 ms), so that the log is wholly copied and the
        next writer starts it over (it would grow as long as writes never paused).
        """
        try:
            if self._checkpoints is None:
                self._checkpoints = sqlite3.connect(
                    self._path, isolation_level=None, check_same_thread=False
                )
                self._checkpoints.execute("PRAGMA wal_autocheckpoint = 0")
            self._checkpoints.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._checkpoint_waits = True
            with self._lock:  # a passive checkpoint never waits for a lock
                self._checkpoint_waits = False
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            log.warning("session store checkpoint failed; tried again later", exc_info=True)

    def _index_pending(self) -> None:
        """`index_pending`, taking the write lock only when a writer noted something."""
        with self.reading():
            if self._db.execute("SELECT 1 FROM messages_unindexed LIMIT 1").fetchone():
                with self.writing() as db:
                    index_pending(db)

    def _inline(self, call: Callable[[], T], stage: bool = False) -> tuple[bool, T | None]:
        """`call()` in a transaction of its own, here, when the connection is free and no
        other process is writing right now: (True, what it returned); else (False, None),
        having done nothing (never waits). A transaction `stage` left open is joined
        instead; with `stage`, the transaction is left open (see `stage`)."""
        if self._staged:  # this thread holds the lock and the open transaction
            try:
                return True, call()  # `_grouped` is "savepoint": undone alone if it fails
            finally:
                if not stage:
                    self._commit_staged()
        if self._checkpoint_waits or not self._lock.acquire(blocking=False):
            return False, None
        try:
            if not self._hasty:  # kept for the next inline write: the pragma is parsed anew
                self._db.execute("PRAGMA busy_timeout = 0")  # each time, 20 us and more
                self._hasty = True
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # another process holds the write lock
                return False, None
            with self._grouping("", commit=not stage):
                result = call()
            if stage:
                self._lock.acquire()  # held until `_commit_staged`
                self._staged, self._grouped = True, "savepoint"
                asyncio.get_running_loop().call_soon(self._step_ended)
            else:
                self._committed()
            return True, result
        finally:
            self._lock.release()

    def _committed(self) -> None:
        if self._commits == CHECKPOINT_EVERY:  # once: until it runs, commits go past
            self._worker.wake()  # its batch does the upkeep, off this thread

    def _step_ended(self) -> None:
        """The event loop's step that staged a write is over: commit it (a failure is logged
        by `_commit_staged`)."""
        with suppress(sqlite3.Error):
            self._commit_staged()

    def _commit_staged(self) -> None:
        """Commit the transaction a staged write left open, if one is (on the loop's thread).

        A failure is logged and raised: to the write that joined the transaction, if one
        did; the transaction is undone.
        """
        if not self._staged:
            return
        self._staged, self._grouped = False, None
        try:
            self._commit()
        except sqlite3.Error:
            log.error("the session store could not commit a staged write", exc_info=True)
            raise
        finally:
            self._lock.release()
        self._committed()

    @contextmanager
    def _grouping(self, join: str, commit: bool = True) -> Iterator[None]:
        """Inside BEGIN: writes join as savepoints; COMMIT at the end (unless not `commit`),
        ROLLBACK on error.

        Checkpoints are Raven's own (`wal_autocheckpoint` is off for this connection): a
        commit that triggered one would copy the log into the database on the committing
        thread, an event loop's included.
        """
        self._grouped = join
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            if commit:
                self._commit()
        finally:
            self._grouped = None

    def _commit(self) -> None:
        """COMMIT; when it fails, ROLLBACK, so that the next write can begin."""
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._commits += 1

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, this thread's until the block ends, waiting up to
        `BUSY_TIMEOUT_MS` for another process's lock."""
        with self._lock:
            self._patient()
            yield self._db

    def _patient(self) -> None:
        """Wait for other processes' locks again (under `_lock`), unless inside the
        transaction of an inline write."""
        if self._hasty and self._grouped != "" and not self._staged:
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._hasty = False

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._grouped == "":  # the one call in its transaction, undone as a whole
                yield self._db
                return
            self._patient()
            begin, undo, done = (
                ("SAVEPOINT w", "ROLLBACK TO w", "RELEASE w")
                if self._grouped
                else ("BEGIN IMMEDIATE", "ROLLBACK", "COMMIT")
            )
            self._db.execute(begin)
            try:
                yield self._db
            except BaseException:
                self._db.execute(undo)
                if self._grouped:
                    self._db.execute(done)
                raise
            self._db.execute(done)

    def create(
        self,
        cwd: str,
        face: str,
        mode: str | None = None,
        model: str | None = None,
        session_id: str | None = None,
    ) -> SessionRecord:
        """A new session; `session_id` lets a face derive ids (it must be unused)."""
        record = new_record(cwd, face, mode, model, session_id)
        with self.writing() as db:
            _insert_session(db, record, record.title, record.updated_at)
        return record

    def fork(self, session_id: str, cwd: str, face: str, upto: int | None = None) -> SessionRecord:
        """A new session holding the transcript of `session_id` (its first `upto` messages,
        or all), with its title, mode and model, naming it as its parent."""
        parent = self.get(session_id)
        record = new_record(cwd, face, parent.mode, parent.model, parent=parent)
        last = upto if upto is not None else MAX_SEQ
        with self.writing() as db:
            _insert_session(db, record, record.title, record.updated_at)
            copied = db.execute(
                "INSERT INTO messages (session_id, seq, body, created_at)"
                " SELECT ?, seq, body, created_at FROM messages"
                " WHERE session_id = ? AND seq <= ?",
                (record.id, parent.id, last),
            ).rowcount
            db.execute(
                "UPDATE sessions SET version = ?, compacted_at = (SELECT COALESCE(MAX(seq), 0)"
                f" FROM messages WHERE session_id = ? AND body LIKE '{COMPACTION_BODY}%')"
                " WHERE id = ?",
                (copied, record.id, record.id),
            )
        return record

    def get_or_create(
        self, session_id: str, cwd: str, face: str, mode: str | None, model: str | None
    ) -> tuple[SessionRecord, Window]:
        """The session and its window, created empty first if it does not exist."""
        try:
            return self.get(session_id), self.window(session_id)
        except SessionNotFound:
            return self.create(cwd, face, mode, model, session_id), Window(0, [])

    def get(self, session_id: str) -> SessionRecord:
        with self.reading() as db:
            row = db.execute(_SELECT + " WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return _record(row)

    def resolve(self, prefix: str) -> str:
        """The one session id that is `prefix` or starts with it (`ses_` may be left off).

        Raises `SessionNotFound` for none and `AmbiguousSession` for several.
        """
        for candidate in dict.fromkeys((prefix, SESSION_ID_PREFIX + prefix)):
            with self.reading():
                if self._db.execute("SELECT 1 FROM sessions WHERE id = ?", (candidate,)).fetchone():
                    return candidate
                rows = self._db.execute(
                    "SELECT id FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY updated_at DESC"
                    " LIMIT ?",
                    (len(candidate), candidate, MAX_SHOWN_MATCHES + 1),
                ).fetchall()
            if len(rows) == 1:
                return str(rows[0][0])
            if rows:
                raise AmbiguousSession(prefix, [str(r[0]) for r in rows])
        raise SessionNotFound(prefix)

    def page(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        query: str | None = None,
        not_face: str | None = None,
    ) -> SessionPage:
        """Newest first; `cursor` continues a previous page; `query` is a piece of the title
        or the directory (any case); `not_face` leaves out that face's sessions."""
        where, params = [], []
        if cwd is not None:
            where.append("cwd = ?")
            params.append(cwd)
        if not_face is not None:
            where.append("face <> ?")
            params.append(not_face)
        if query:
            pattern = like_pattern(query)
            where.append("(title LIKE ? ESCAPE '\\' OR cwd LIKE ? ESCAPE '\\')")
            params += [pattern, pattern]
        if cursor:
            updated_at, last_id = decode_cursor(cursor)
            where.append("(updated_at < ? OR (updated_at = ? AND id < ?))")
            params += [updated_at, updated_at, last_id]
        sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        with self.reading():
            rows = self._db.execute(sql, [*params, limit + 1]).fetchall()
        records = [_record(r) for r in rows[:limit]]
        more = len(rows) > limit
        next_cursor = encode_cursor(records[-1]) if more and records else None
        return SessionPage(records, next_cursor)

    def append(
        self,
        session_id: str,
        message: Message,
        title: str | None = None,
        create: SessionRecord | None = None,
        claimant: int | None = None,
    ) -> None:
        """Commit one message at the end of the transcript (and a new title, if given).

        With `create`, the session row is inserted in the same transaction first, as it is
        with this message (claimed for a turn of process `claimant`, if given).
        """
        long = is_long(message)
        if long:  # written into a blob of its size, a piece at a time: never whole in memory
            size = sum(map(len, body_pieces(message)))
        else:
            self._handing = MESSAGE_ADAPTER.dump_json(message).decode()
        stamp = now_iso()
        with self.writing() as db:
            if create is not None:
                named = create.title if title is None else title
                _insert_session(db, create, named, stamp, version=1, turn_pid=claimant)
            else:
                touched = db.execute(
                    "UPDATE sessions SET updated_at = ?, title = COALESCE(?, title), "
                    "version = version + 1 WHERE id = ?",
                    (stamp, title, session_id),
                )
                if touched.rowcount == 0:
                    raise SessionNotFound(session_id)
            # VALUES with the next seq as a subquery: as `INSERT … SELECT`, SQLite copied the
            # body through the select's row twice more (19 against 2 MiB for 8 MB). The body
            # is handed over by a function, not bound: the statement cache keeps a bound
            # value's copy until the statement is next used (a long answer's, for good).
            # SQLite still copies a body it is given about twice on its way to the page;
            # a long body's zeroblob, the row's last column, is only written as pages.
            added = db.execute(
                "INSERT INTO messages (session_id, seq, created_at, body) VALUES (?, "
                "(SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?), ?, "
                + ("zeroblob(?))" if long else "raven_handed())"),
                (session_id, session_id, stamp, *((size,) if long else ())),
            )
            if long:
                rowid = added.lastrowid
                assert rowid is not None  # a row was inserted
                with db.blobopen("messages", "body", rowid) as blob:
                    for piece in body_pieces(message):
                        blob.write(piece)
            db.execute(  # the row its trigger noted
                "UPDATE messages_unindexed SET text = ? WHERE message_rowid = ?",
                (searchable_text(message), added.lastrowid),
            )
            if isinstance(message, CompactionMessage):
                db.execute(
                    "UPDATE sessions SET compacted_at = "
                    "(SELECT seq FROM messages WHERE rowid = ?) WHERE id = ?",
                    (added.lastrowid, session_id),
                )

    def _handed(self) -> str | None:
        body, self._handing = self._handing, None
        return body

    def messages(
        self, session_id: str, last: int | None = None, upto: int | None = None
    ) -> list[Message]:
        """The transcript in order; with `upto`, only its first `upto` messages; with
        `last`, only the newest `last` of those."""
        self.get(session_id)
        sql = "SELECT body FROM messages WHERE session_id = ? AND seq <= ? ORDER BY seq DESC"
        params: list[object] = [session_id, MAX_SEQ if upto is None else upto]
        if last is not None:
            sql += " LIMIT ?"
            params.append(last)
        with self.reading():
            rows = self._db.execute(sql, params).fetchall()
        return [MESSAGE_ADAPTER.validate_json(body) for (body,) in reversed(rows)]

    def window(self, session_id: str) -> Window:
        """The messages from the newest compaction's `kept_from` on."""
        with self.reading() as db:
            row = db.execute(
                "SELECT m.body FROM sessions s LEFT JOIN messages m"
                " ON m.session_id = s.id AND m.seq = s.compacted_at WHERE s.id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            start = kept_from(row[0])
            rows = db.execute(
                "SELECT body FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
                (session_id, start),
            ).fetchall()
        return Window(start, [MESSAGE_ADAPTER.validate_json(body) for (body,) in rows])

    def claim_turn(self, session_id: str, pid: int) -> int:
        """Mark a turn of process `pid` as running in the session; returns its version (the
        number of messages written). Raises `TurnElsewhere` while another live process has
        a turn there; a claim left by a process that died is taken over."""
        with self.writing() as db:
            row = db.execute(
                "SELECT turn_pid, version FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            holder, version = row
            _refuse_elsewhere(session_id, holder, pid)
            db.execute("UPDATE sessions SET turn_pid = ? WHERE id = ?", (pid, session_id))
        return int(version)

    def version(self, session_id: str) -> int:
        """The number of messages written to the session, by any process."""
        with self.reading():
            row = self._db.execute(
                "SELECT version FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
        if row is None:
            raise SessionNotFound(session_id)
        return int(row[0])

    def release_turn(self, session_id: str, pid: int, failure: str | None = None) -> None:
        """End the turn of process `pid`: its claim, if `claim_turn` made one, and the
        session's last `failure`. A no-op while another process holds the session."""
        with self.writing() as db:
            db.execute(
                "UPDATE sessions SET turn_pid = NULL, failure = ? "
                "WHERE id = ? AND (turn_pid = ? OR turn_pid IS NULL)",
                (failure, session_id, pid),
            )

    def update(
        self,
        session_id: str,
        *,
        title: str | None = None,
        mode: str | None = None,
        model: str | None = None,
        closed: bool | None = None,
        pid: int | None = None,
    ) -> SessionRecord:
        """Change what is given; with `pid`, refuse (`TurnElsewhere`) while a process other
        than `pid` runs a turn in the session."""
        changes = {"title": title, "mode": mode, "model": model, "closed": closed}
        sets = {k: v for k, v in changes.items() if v is not None}
        with self.writing() as db:
            if pid is not None:
                self._check_turn(db, session_id, pid)
            if sets:
                assignments = ", ".join(f"{k} = ?" for k in sets)
                cur = db.execute(
                    f"UPDATE sessions SET {assignments}, updated_at = ? WHERE id = ?",
                    [*sets.values(), now_iso(), session_id],
                )
                if cur.rowcount == 0:
                    raise SessionNotFound(session_id)
        return self.get(session_id)

    def search(self, text: str, cwd: str | None = None, limit: int = 20) -> list[SearchHit]:
        """Sessions whose transcripts hold `text` (all its words), best match first, each with
        a snippet where `MATCH_START` and `MATCH_END` mark the words found."""
        words = search_words(text)
        if not words:
            return []
        query = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        sql = (
            "SELECT m.session_id, snippet(messages_fts, 0, char(2), char(3), '…', 12) "
            "FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid "
            "JOIN sessions s ON s.id = m.session_id "
            "WHERE messages_fts MATCH ?" + (" AND s.cwd = ?" if cwd else "") + " ORDER BY rank"
        )
        params: list[object] = [query, *([cwd] if cwd else [])]
        hits: dict[str, str] = {}
        self._index_pending()
        with self.reading():
            for session_id, snippet in self._db.execute(sql, params):
                hits.setdefault(str(session_id), " ".join(str(snippet).split()))
                if len(hits) >= limit:
                    break
        return [SearchHit(self.get(sid), snippet) for sid, snippet in hits.items()]

    def _check_turn(self, db: sqlite3.Connection, session_id: str, pid: int) -> None:
        row = db.execute("SELECT turn_pid FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is not None:
            _refuse_elsewhere(session_id, row[0], pid)

    def delete(self, session_id: str, pid: int | None = None) -> bool:
        """Remove the session and its transcript; False when there was none. With `pid`,
        refuse (`TurnElsewhere`) while a process other than `pid` runs a turn in it."""
        with self.writing() as db:
            if pid is not None:
                self._check_turn(db, session_id, pid)
            db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            cur = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        return cur.rowcount > 0


def _refuse_elsewhere(session_id: str, holder: int | None, pid: int) -> None:
    """`TurnElsewhere` when `holder` is a live process other than `pid` (a claim left by a
    process that died counts as none)."""
    if holder is not None and holder != pid and process_alive(holder):
        raise TurnElsewhere(session_id, holder)


def _insert_session(
    db: sqlite3.Connection,
    record: SessionRecord,
    title: str,
    updated_at: str,
    version: int = 0,
    turn_pid: int | None = None,
) -> None:
    db.execute(
        "INSERT INTO sessions"
        " (id, cwd, title, mode, model, face, created_at, updated_at, version, parent, turn_pid)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.id,
            record.cwd,
            title,
            record.mode,
            record.model,
            record.face,
            record.created_at,
            updated_at,
            version,
            record.parent,
            turn_pid,
        ),
    )


_SELECT = (
    "SELECT id, cwd, title, mode, model, face, created_at, updated_at, closed, failure, parent"
    " FROM sessions"
)


def _record(row: tuple[Any, ...]) -> SessionRecord:
    sid, cwd, title, mode, model, face, created, updated, closed, failure, parent = row
    return SessionRecord(
        id=str(sid),
        cwd=str(cwd),
        title=str(title),
        mode=mode,
        model=model,
        face=str(face),
        created_at=str(created),
        updated_at=str(updated),
        closed=bool(closed),
        failure=failure,
        parent=parent,
    )


class SqliteSessions(SqliteTasks):
    """`SqliteStore` as a `Sessions`: one file, the processes of one machine.

    A turn's claim names this process; it lasts until released or until the process is
    gone, so it is never renewed. The event log stays in each process's memory.
    """

    shared = False

    def __init__(self, path: Path) -> None:
        self.db = SqliteStore(path)

    async def aclose(self) -> None:
        self.db.close()

    async def create(
        self,
        cwd: str,
        face: str,
        mode: str | None = None,
        model: str | None = None,
        session_id: str | None = None,
    ) -> SessionRecord:
        return await self.db.call(self.db.create, cwd, face, mode, model, session_id)

    async def get_or_create(
        self, session_id: str, cwd: str, face: str, mode: str | None, model: str | None
    ) -> tuple[SessionRecord, Window]:
        return await self.db.call(self.db.get_or_create, session_id, cwd, face, mode, model)

    async def fork(
        self, session_id: str, cwd: str, face: str, upto: int | None = None
    ) -> SessionRecord:
        return await self.db.call(self.db.fork, session_id, cwd, face, upto)

    async def get(self, session_id: str) -> SessionRecord:
        return await self.db.call(self.db.get, session_id)

    async def resolve(self, prefix: str) -> str:
        return await self.db.call(self.db.resolve, prefix)

    async def page(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        query: str | None = None,
        not_face: str | None = None,
    ) -> SessionPage:
        return await self.db.call(self.db.page, cwd, cursor, limit, query, not_face)

    async def append(
        self,
        session_id: str,
        message: Message,
        title: str | None = None,
        create: SessionRecord | None = None,
        soon: bool = False,
        claimed: bool = False,
    ) -> None:
        call = self.db.stage if soon else self.db.call
        claimant = os.getpid() if claimed else None
        await call(self.db.append, session_id, message, title, create, claimant)

    async def messages(
        self, session_id: str, last: int | None = None, upto: int | None = None
    ) -> list[Message]:
        return await self.db.call(self.db.messages, session_id, last, upto)

    async def window(self, session_id: str) -> Window:
        return await self.db.call(self.db.window, session_id)

    async def version(self, session_id: str) -> int:
        return await self.db.call(self.db.version, session_id)

    async def claim_turn(self, session_id: str) -> int:
        return await self.db.call(self.db.claim_turn, session_id, os.getpid())

    async def renew_claims(self, session_ids: list[str]) -> list[str]:
        """Nothing to renew: a claim here lasts as long as its process."""
        return session_ids

    async def release_turn(self, session_id: str, failure: str | None = None) -> None:
        await self.db.call(self.db.release_turn, session_id, os.getpid(), failure)

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
        pid = os.getpid() if guarded else None
        return await self.db.call(
            self.db.update, session_id, title=title, mode=mode, model=model, closed=closed, pid=pid
        )

    async def search(self, text: str, cwd: str | None = None, limit: int = 20) -> list[SearchHit]:
        return await self.db.call(self.db.search, text, cwd, limit)

    async def delete(self, session_id: str, guarded: bool = False) -> bool:
        return await self.db.call(self.db.delete, session_id, os.getpid() if guarded else None)

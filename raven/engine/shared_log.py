"""The event logs of live sessions whose store replicas share: written to the store, read
back from it.

Each event a live session publishes is appended to the store's log of the session, in
batches gathered for `FLUSH_S`, one at a time per session (what is published during one
goes in the next), so the store numbers a process's events in the order they happened.
Every listener, in this process too, hears an event once the store has it, under the
store's number, read back in the store's order whoever wrote it: a cursor holds on every
replica. A turn's events are appended only while its process holds the session's claim;
its last ones go in the statement that releases the claim. Never runs a turn; knows no
face."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from raven.engine.codec import event_from_json, event_json
from raven.engine.events import SessionEnded, TurnEnded
from raven.engine.log import LogEvent
from raven.engine.session import LiveSession
from raven.sessions import (
    LoggedRow,
    NewEvent,
    SessionNotFound,
    SharedSessions,
    StoreUnavailable,
    TurnLost,
)

log = logging.getLogger(__name__)

FLUSH_S = 0.02
"""How long a session's events gather before they are stored together: a turn's stream
goes in a few transactions, not one per piece of text (its end goes with the release)."""
READ_BACK_S = 10.0
"""How long a turn's end waits to be read back from the store before going on without."""

Adopt = Callable[[LiveSession, LogEvent], None]
"""What the runtime does with a session event read back (a mode another replica set)."""
_Batch = list[tuple[NewEvent, LogEvent]]


class SharedLog:
    def __init__(self, store: SharedSessions, adopt: Adopt) -> None:
        self._store = store
        self._adopt = adopt
        self._sessions: dict[str, LiveSession] = {}
        """The live sessions whose logs are copies of the store's."""
        self._pending: dict[str, _Batch] = {}
        self._flushing: dict[str, asyncio.Task[None]] = {}
        self._gathering: set[str] = set()
        """Sessions whose flush is still gathering events, before it writes."""
        self._reading: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._ended: dict[str, tuple[int | None, _Batch]] = {}
        """A turn's last events, stored with its release and not yet read back."""
        self._ending: set[str] = set()
        """Sessions whose turn here is ending: from its release until the session is free,
        no end read back is heard (this process's own, read back before it is told)."""
        self._writing: set[str] = set()
        """Sessions whose events this process is storing: the store's word of new events
        waits (`_heard`) until the write's own answer, which numbers them."""
        self._heard: dict[str, int] = {}
        """Per session, the newest event the store told of while this process wrote."""

    async def attach(self, live: LiveSession) -> None:
        """Make the session's log a copy of the store's, from its oldest event kept."""
        epoch, head, rows = await self._store.log_open(live.id)
        if rows:
            live.log.rebase(rows[0].version, epoch, rows[0].seq - 1)
        else:
            live.log.rebase(live.version, epoch, head)
        self._sessions[live.id] = live
        self._ingest(live, rows)

    def detach(self, session_id: str) -> None:
        """Stop reading the session's log (what it published is still stored)."""
        self._sessions.pop(session_id, None)
        self._ending.discard(session_id)
        self._writing.discard(session_id)
        self._heard.pop(session_id, None)

    # -- writing -------------------------------------------------------------------------

    def publish(self, live: LiveSession, event: LogEvent) -> None:
        """Queue `event` for the store; listeners hear it once it is stored."""
        body = json.dumps(event_json(event), ensure_ascii=False)
        row = NewEvent(live.version, type(event).__name__, body)
        self._pending.setdefault(live.id, []).append((row, event))
        if live.id not in self._flushing:
            self._flushing[live.id] = asyncio.create_task(self._flush(live))

    async def publish_stored(self, session_id: str, event: LogEvent) -> None:
        """Append `event` to the log of a session not live here (a close, say)."""
        body = json.dumps(event_json(event), ensure_ascii=False)
        await self._store.log_append(session_id, [NewEvent(0, type(event).__name__, body)], False)

    async def _flush(self, live: LiveSession) -> None:
        try:
            while live.id in self._pending:
                self._gathering.add(live.id)
                try:
                    await asyncio.sleep(FLUSH_S)
                finally:
                    self._gathering.discard(live.id)
                batch = self._pending.pop(live.id, [])
                rows = [row for row, _ in batch]
                self._writing.add(live.id)
                try:
                    first = await self._store.log_append(live.id, rows, fenced=live.is_busy)
                    self._deliver(live, first, batch)
                except TurnLost:
                    log.warning("session %s: another replica ended this turn; stopped", live.id)
                    live.cancel_turn()
                    return
                except SessionNotFound:
                    return  # deleted: its log went with it
                except Exception:  # never the end of the flushing: the next batch is tried
                    log.exception("session %s: %d events not stored", live.id, len(rows))
                finally:
                    if live.id not in self._ending:  # else once the turn's end is told
                        self._written(live)
        finally:
            self._flushing.pop(live.id, None)

    async def settle(self, live: LiveSession) -> None:
        """Store what the session published so far (its listeners hear it), while it is
        still claimed."""
        while (flushing := self._flushing.get(live.id)) is not None:
            await asyncio.wait([flushing])

    async def end_turn(self, live: LiveSession, end: TurnEnded) -> None:
        """While the session is still claimed: store the turn's last events and its end in
        the transaction that releases the claim (keeping `end.error` as its failure)."""
        self._ending.add(live.id)
        flushing = self._flushing.get(live.id)
        if flushing is not None:
            if live.id in self._gathering:  # what it gathers goes with the release instead
                flushing.cancel()
            await asyncio.wait([flushing])
        body = json.dumps(event_json(end), ensure_ascii=False)
        batch = [*self._pending.pop(live.id, []), (NewEvent(live.version, "TurnEnded", body), end)]
        self._writing.add(live.id)  # until told: its events are delivered then
        try:
            first = await self._store.end_turn(live.id, end.error, [row for row, _ in batch])
        except Exception:
            log.exception("session %s: the turn's end was not stored", live.id)
            first = None
        self._ended[live.id] = (first, batch)

    async def turn_told(self, live: LiveSession) -> None:
        """Once the session is free: its listeners hear the turn's end, and all before it."""
        self._ending.discard(live.id)
        first, batch = self._ended.pop(live.id, (None, []))
        if first is None:  # not stored: this process's listeners hear it all the same
            for row, event in batch:
                live.log.ingest(live.log.seq + 1, event, row.version)
            self._written(live)
            return
        self._deliver(live, first, batch)
        if live.log.seq < first + len(batch) - 1:  # others' events came first: read them too
            try:
                async with asyncio.timeout(READ_BACK_S):
                    await self._read_now(live.id)
            except TimeoutError:
                log.warning("session %s: the turn's end was not read back in time", live.id)
        self._written(live)

    def _written(self, live: LiveSession) -> None:
        """This process's write is delivered: read what the store told of meanwhile, if
        this copy does not hold it (another replica's events)."""
        self._writing.discard(live.id)
        head = self._heard.pop(live.id, None)
        if head is not None:
            self.wake(live.id, head)

    def _deliver(self, live: LiveSession, first: int, batch: _Batch) -> None:
        """Events this process stored, numbered from `first`: into the copy right away
        when they follow what it holds; otherwise others' came first, read back."""
        if first == live.log.seq + 1:
            for offset, (row, event) in enumerate(batch):
                self._take(live, first + offset, event, row.version)
        elif first > live.log.seq + 1:
            self.wake(live.id)

    # -- reading -------------------------------------------------------------------------

    def wake(self, session_id: str | None = None, head: int | None = None) -> None:
        """Read the session's log (None: every session's) from where its copy ends; `head`:
        the store's newest event, when known (nothing to read if the copy has it)."""
        ids = list(self._sessions) if session_id is None else [session_id]
        for sid in ids:
            live = self._sessions.get(sid)
            if live is None or (head is not None and live.log.seq >= head):
                continue
            if head is not None and sid in self._writing:  # the write's answer may hold it
                self._heard[sid] = max(head, self._heard.get(sid, 0))
                continue
            if sid in self._reading:
                self._again.add(sid)
            else:
                self._reading[sid] = asyncio.create_task(self._read(sid))

    async def _read_now(self, session_id: str) -> None:
        reading = self._reading.get(session_id)
        if reading is None:
            self._reading[session_id] = reading = asyncio.create_task(self._read(session_id))
        else:
            self._again.add(session_id)
        await asyncio.wait([reading])

    async def catch_up(self, live: LiveSession) -> None:
        """Read the session's log up to the store's newest event."""
        if live.id in self._sessions:
            await self._read_now(live.id)

    async def _read(self, session_id: str) -> None:
        try:
            while True:
                self._again.discard(session_id)
                live = self._sessions.get(session_id)
                if live is None:
                    return
                try:
                    rows = await self._store.log_since(session_id, live.log.seq)
                except SessionNotFound:  # deleted by another replica
                    self._take(live, live.log.seq + 1, SessionEnded(), live.version)
                    return
                except StoreUnavailable as exc:
                    log.warning("session %s: its log cannot be read now: %s", session_id, exc)
                    return
                self._ingest(live, rows)
                if session_id not in self._again:
                    return
        finally:
            self._reading.pop(session_id, None)

    def _ingest(self, live: LiveSession, rows: list[LoggedRow]) -> None:
        for row in rows:
            if row.seq <= live.log.seq:
                continue  # this copy has it (this process stored it, or read it already)
            event = _parsed(row)
            if isinstance(event, TurnEnded) and live.is_busy and live.id in self._ending:
                return  # heard once the session is free (`turn_told` reads on from here)
            if row.seq > live.log.seq + 1:  # the store let them go before this copy read them
                live.log.rebase(row.version, live.log.epoch, row.seq - 1)
            self._take(live, row.seq, event, row.version)

    def _take(self, live: LiveSession, seq: int, event: LogEvent | None, version: int) -> None:
        live.log.ingest(seq, event, version)
        if event is not None:
            self._adopt(live, event)

    async def aclose(self) -> None:
        """Store what is queued (within `READ_BACK_S`) and stop reading."""
        for task in self._reading.values():
            task.cancel()
        work = [*self._flushing.values(), *self._reading.values()]
        if work:
            await asyncio.wait(work, timeout=READ_BACK_S)
        self._sessions.clear()


def _parsed(row: LoggedRow) -> LogEvent | None:
    """The event a row holds; None for one this Raven does not know (a newer replica's)."""
    try:
        event = event_from_json(json.loads(row.body))
    except (ValueError, TypeError, KeyError):
        log.warning("an event of the shared log could not be read: %.200s", row.body)
        return None
    return event  # type: ignore[no-any-return]

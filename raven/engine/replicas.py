"""Keeping in step with the other replicas of a session store they share.

For a runtime on a shared store (PostgreSQL), `Replicas`:
- hears the store's changes: a session's log grew (its live copy here reads it), or
  something was sent to a turn running here (a cancel, a steer, an answer: done at once);
- every third of `leaseS`, renews the claims of the turns running here (a turn whose
  claim was lost meanwhile is stopped) and ends every turn whose claim lapsed: its
  replica died or stopped renewing. The session's dangling tool calls get results, its
  log gets the turn's end, and the session keeps the failure, so nothing stays stuck
  longer than `leaseS` plus a third of it; then whoever keeps tasks ends those no turn
  runs any more (`Runtime.on_sweep`): a task's turn is its session's, and has no lease
  of its own;
- hands on what it hears of the tasks kept beside the sessions (`raven.sessions.tasks`)
  to whoever keeps them (`Runtime.on_task_change`: A2A): a task's id and new version, or
  None when any may have changed;
- without LISTEN (`listen: false`), looks for changes every `pollS`.
Never runs a turn itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from raven.engine.codec import event_json
from raven.engine.events import TurnEnded
from raven.engine.history import interrupted_results
from raven.engine.session import LiveSession
from raven.engine.shared_log import SharedLog
from raven.sessions import (
    NewEvent,
    SessionNotFound,
    SharedSessions,
    StoreUnavailable,
    TurnElsewhere,
)

log = logging.getLogger(__name__)

LAPSED_TURN = "Raven stopped before this turn finished: its replica went away."
STOP_S = 5.0


class Replicas:
    def __init__(
        self,
        store: SharedSessions,
        logs: SharedLog,
        live: Callable[[], list[LiveSession]],
        tasks: Callable[[str | None, int], None],
        swept: Callable[[list[str]], Awaitable[None]],
    ) -> None:
        self._store = store
        self._logs = logs
        self._live = live
        self._tasks_changed = tasks
        self._swept = swept
        self._started = False
        self._stopping = asyncio.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Begin hearing the store and keeping claims (idempotent)."""
        if not self._started:
            self._started = True
            await self._store.watch(self)
            self._ticker = asyncio.create_task(self._tick(), name="sessions:replicas")

    async def aclose(self) -> None:
        self._stopping.set()
        work = [*self._tasks, *([self._ticker] if self._ticker else [])]
        for task in work:
            task.cancel()
        if work:
            await asyncio.wait(work, timeout=STOP_S)

    # -- what the store tells (`raven.sessions.Watcher`) ---------------------------------

    def log_changed(self, session_id: str, head: int) -> None:
        self._logs.wake(session_id, head)

    def inbox_changed(self, session_id: str) -> None:
        if any(s.id == session_id and s.is_busy for s in self._live()):
            self._spawn(self._take_inbox([session_id]))

    def task_changed(self, task_id: str, version: int) -> None:
        self._tasks_changed(task_id, version)

    def missed(self) -> None:
        self._logs.wake()
        self._tasks_changed(None, 0)
        self._spawn(self._take_inbox([s.id for s in self._live() if s.is_busy]))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- looking ---------------------------------------------------------------------------

    async def _tick(self) -> None:
        store = self._store
        every = store.lease_s / 3
        look = every if store.listening else min(store.poll_s, every)
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(look):
                    await self._stopping.wait()
                    return
            try:
                if not store.listening:
                    self._logs.wake()
                    self._tasks_changed(None, 0)
                    await self._take_inbox([s.id for s in self._live() if s.is_busy])
                if loop.time() >= due:
                    due = loop.time() + every
                    await self._renew()
                    await self._store.task_prune()
                    await self._swept(await self._sweep())
            except StoreUnavailable as exc:
                log.warning("the shared session store cannot be reached: %s", exc)
            except Exception:
                log.exception("keeping in step with the other replicas failed")

    async def _take_inbox(self, session_ids: list[str]) -> None:
        if not session_ids:
            return
        for item in await self._store.take_inbox(session_ids):
            live = next((s for s in self._live() if s.id == item.session_id), None)
            if live is None or not live.is_busy:
                continue
            if item.kind == "cancel":
                live.cancel_turn()
            elif item.kind == "steer":
                live.steer(item.text)
            elif item.kind == "answer":
                answer = json.loads(item.text)
                live.answer(answer["requestId"], answer["value"])

    async def _renew(self) -> None:
        claimed = [s for s in self._live() if s.claimed]
        held = set(await self._store.renew_claims([s.id for s in claimed]))
        for live in claimed:
            if live.id not in held and live.claimed:
                log.warning("session %s: its claim lapsed; the turn is stopped", live.id)
                live.cancel_turn()

    async def _sweep(self) -> list[str]:
        """End every lapsed turn; the sessions whose turns this process ended."""
        ended = []
        for session_id in await self._store.lapsed():
            try:
                await self._end_lapsed(session_id)
            except (TurnElsewhere, SessionNotFound):
                continue  # another replica ended it first, or it is gone
            ended.append(session_id)
        return ended

    async def _end_lapsed(self, session_id: str) -> None:
        """Take over a lapsed claim and end its turn: results for its dangling tool calls,
        the turn's end in the log, the failure kept."""
        version = await self._store.claim_turn(session_id)
        for result in interrupted_results(await self._store.messages(session_id)):
            await self._store.append(session_id, result)
            version += 1
        end = TurnEnded("end_turn", error=LAPSED_TURN)
        row = NewEvent(version, "TurnEnded", json.dumps(event_json(end), ensure_ascii=False))
        await self._store.end_turn(session_id, LAPSED_TURN, [row])
        log.warning("session %s: its replica went away mid-turn; the turn ended failed", session_id)

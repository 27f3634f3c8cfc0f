"""A2A tasks kept in the session store, across the processes that share it.

A replica follows a task another one runs by reading the events stored with the task
(`tail`), each time the store says the task changed (PostgreSQL's NOTIFY, which the
runtime hands on: `Runtime.on_task_change`). The replica running a task learns at once
that another wrote it (a follow-up, a cancel) and re-reads it (`LiveTask.reload`).

A task has no lease of its own: its turn is its session's, and the session's claim says
who runs it (`TaskRows.tasks_unrun`). A task nobody runs ends FAILED (`sweep`): at start,
and with replicas each time the engine has renewed this process's claims and ended the
lapsed turns (`Runtime.on_sweep`), so the cadence is the engine's. Which tasks nobody
runs:
- one whose runner is gone (a process of this machine that exited, killed or not);
- one working in a session whose lapsed turn the engine just ended here;
- one working while its runner does not hold its session's claim, on two sweeps in a
  row at one version (its claim lapsed, and another replica ended the turn; the second
  look leaves alone a turn that just let go of its claim and is writing the task's end);
- one submitted for longer than a runner waits for its turn (it fails itself then).
Never runs a turn and never speaks a wire format.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any

from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.types import Task, TaskState, TaskStatusUpdateEvent

from raven.a2a.auth import Caller
from raven.a2a.live_task import LiveTask, agent_said, status_event
from raven.a2a.runner import STOPPED_MESSAGE
from raven.a2a.store import RUNNING_NAMES, SETTLED, TERMINAL, RowsTaskStore
from raven.deadlines import finish_within
from raven.engine import Runtime

log = logging.getLogger(__name__)

STOP_S = 5.0

WriteStored = Callable[[str, ServerCallContext, TaskStatusUpdateEvent], Awaitable[Any]]
"""Apply a status change to a task this process does not run (`TaskService`)."""


class Elsewhere:
    def __init__(
        self,
        rows: RowsTaskStore,
        runtime: Runtime,
        live: dict[str, LiveTask],
        write_stored: WriteStored,
        longest_wait_s: float,
    ) -> None:
        """`live`: the tasks this process runs, by id (the service's own dict);
        `longest_wait_s`: past it, a task still submitted was left behind."""
        self._rows = rows
        self._runtime = runtime
        self._live = live
        self._write_stored = write_stored
        self._longest_wait_us = int(longest_wait_s * 1e6)
        self._shared = False
        self._suspects: dict[str, int] = {}
        """Working tasks nobody ran at the last sweep, and their versions then."""
        self._heard: dict[str, set[asyncio.Event]] = {}
        """Per task followed from another replica, its tails' events: set when the store
        says it changed."""
        self._checks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()

    async def start(self, shared: bool) -> None:
        """End the tasks whose runner is gone; with replicas (`shared`), hear the store,
        and sweep again each time the engine has renewed this process's claims."""
        self._shared = shared
        await self.sweep()
        if shared:
            self._runtime.on_task_change(self.changed)
            self._runtime.on_sweep(self.sweep)

    async def aclose(self) -> None:
        """Stop the checks under way and every tail, within `STOP_S`."""
        self._stopping.set()
        await finish_within(list(self._checks), STOP_S)

    async def tail(
        self, task_id: str, after: TaskVersion, through_input: bool
    ) -> AsyncIterator[Event]:
        """The events another replica writes for the task, after version `after`: read
        each time the store says the task changed (or may have)."""
        heard = asyncio.Event()
        tails = self._heard.setdefault(task_id, set())
        tails.add(heard)
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            while True:
                heard.clear()
                for version, event in await self._rows.events(task_id, after):
                    after = version
                    yield event
                    state = _state(event)
                    if state in TERMINAL or (state in SETTLED and not through_input):
                        return
                changed = asyncio.ensure_future(heard.wait())
                await asyncio.wait([changed, stopping], return_when=asyncio.FIRST_COMPLETED)
                if not changed.done():  # this server stops
                    changed.cancel()
                    return
        finally:
            stopping.cancel()
            tails.discard(heard)
            if not tails:
                self._heard.pop(task_id, None)

    def changed(self, task_id: str | None, version: int) -> None:
        """The store says the task was written to `version` (None: any may have changed):
        its followers here read it, and its runner, if here and the write was another
        replica's, learns what was written."""
        tails = self._heard.values() if task_id is None else [self._heard.get(task_id, set())]
        for events in tails:
            for event in events:
                event.set()
        live = self._live.values() if task_id is None else [self._live.get(task_id)]
        for task in live:
            if task is not None and (task_id is None or not task.wrote(version)):
                check = asyncio.create_task(self._check(task, version))
                self._checks.add(check)
                check.add_done_callback(self._checks.discard)

    async def _check(self, task: LiveTask, version: int) -> None:
        """Under the task's lock (after the write under way here, whose NOTIFY may come
        before the write's own answer): read the task again, unless `version` is this
        process's own write."""
        try:
            async with task.lock:
                if task.over or task.manager.current_version.is_missing:
                    return  # not written yet
                if task.wrote(version):
                    return
                stored = await self._rows.get(task.id, task.context)
                if stored is not None and stored.version != task.manager.current_version:
                    await task.reload()
        except Exception:
            log.exception("A2A task %s: reading another replica's write failed", task.id)

    async def sweep(self, lapsed: Collection[str] = ()) -> None:
        """End FAILED every task nobody runs any more (see the module's docstring);
        `lapsed`: the sessions whose lapsed turns the engine just ended here."""
        now_us = time.time_ns() // 1000
        suspects, ended = {}, 0
        for unrun in await self._rows.rows.tasks_unrun(RUNNING_NAMES):
            if unrun.id in self._live:
                continue
            if not unrun.gone:
                if not self._shared:
                    continue  # a process of this machine, which will end it
                if unrun.state == "TASK_STATE_WORKING":
                    seen = self._suspects.get(unrun.id) == unrun.version
                    if not seen and unrun.session_id not in lapsed:
                        suspects[unrun.id] = unrun.version
                        continue
                elif now_us - unrun.updated_us <= self._longest_wait_us:
                    continue  # waits for its turn
            if await self._fail(unrun.id, unrun.owner):
                ended += 1
        self._suspects = suspects
        if ended:
            log.warning("%d A2A task(s) whose turn was gone ended failed", ended)

    async def _fail(self, task_id: str, owner: str) -> bool:
        context = ServerCallContext(user=Caller(owner))
        stored = await self._rows.get(task_id, context)
        if stored is None or stored.task.status.state in TERMINAL:
            return False
        context_id = stored.task.context_id
        said = agent_said(task_id, context_id, STOPPED_MESSAGE)
        failed = status_event(task_id, context_id, TaskState.TASK_STATE_FAILED, said)
        await self._write_stored(task_id, context, failed)
        return True


def _state(event: Event) -> int | None:
    if isinstance(event, Task | TaskStatusUpdateEvent):
        return event.status.state
    return None

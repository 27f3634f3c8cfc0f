"""Sends that start a task, served without the SDK's request handler.

The SDK's handler runs every task as an `ActiveTask`: a producer, a consumer and two
queue dispatchers, about 1.2 ms of bookkeeping a task, more than Raven's own turn.
Raven drives its executor itself instead: each event is applied to the task with the
SDK's `TaskManager` (saved to the task store as it comes, as the SDK does) and handed
to the task's subscribers. A task started here stays here until it ends: its
follow-ups, SubscribeToTask and CancelTask are served here too, with the SDK handler's
semantics (blocking or `returnImmediately`, streamed or not). Never takes a task it did
not start (stored tasks of an earlier run go to the SDK's handler), nor a send asking
for push notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from a2a.helpers import new_text_part
from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import TaskManager, TaskStore, TaskUpdater
from a2a.types import (
    Message,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import InternalError, TaskNotFoundError, UnsupportedOperationError
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import apply_history_length, validate_history_length

from raven.a2a.executor import FAILED_MESSAGE, STOPPED_MESSAGE, RavenExecutor

log = logging.getLogger(__name__)

SETTLED = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES
"""States a subscriber's stream ends in: nothing more happens until a follow-up."""
CANCEL_WAIT_S = 5.0
"""How long a cancelled task's executor gets to stop before it is cancelled outright."""


@dataclass
class _Live:
    """A task started here, from its first message until it ends."""

    task_id: str
    context_id: str
    manager: TaskManager
    runner: asyncio.Task[None] | None = None
    """The executor's `execute` for the latest message; done while the task waits for input."""
    subscribers: set[asyncio.Queue[Event | None]] = field(default_factory=set)
    """A send's stream: it ends when the task ends or waits for input."""
    watchers: set[asyncio.Queue[Event | None]] = field(default_factory=set)
    """SubscribeToTask's streams: they go on through input-required until the task ends."""
    cancelling: bool = False
    progressed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by each event the runner sends; cleared when a message starts it."""

    def close_streams(self, ended: bool = False) -> None:
        """End the sends' streams; with `ended` (a terminal state), the watchers' too."""
        closing = [self.subscribers, *([self.watchers] if ended else [])]
        for queues in closing:
            for queue in queues:
                queue.put_nowait(None)
            queues.clear()


class _Sink(EventQueue):
    """The executor's event queue: applies each event to the task and tells subscribers."""

    def __init__(self, live: _Live) -> None:
        self._live = live

    async def enqueue_event(self, event: Event) -> None:
        if isinstance(event, Message):
            raise InternalError(message="A task's executor sent a bare message")
        task = await self._live.manager.save_task_event(event)
        self._live.progressed.set()
        if isinstance(event, Task):  # the store keeps this very object and updates it
            event = _copy(event)
        for queue in (*self._live.subscribers, *self._live.watchers):
            queue.put_nowait(event)
        if task is not None and task.status.state in SETTLED:
            self._live.close_streams(ended=task.status.state in TERMINAL_TASK_STATES)


class DirectTasks:
    """The tasks this server started without the SDK's handler, and how to reach them."""

    def __init__(
        self, executor: RavenExecutor, store: TaskStore, builder: SimpleRequestContextBuilder
    ) -> None:
        self._executor = executor
        self._store = store
        self._builder = builder
        self._live: dict[str, _Live] = {}

    def takes(self, request: SendMessageRequest) -> bool:
        """True for a send that starts a task or continues one started here, unless it
        asks for push notifications (the SDK's handler sends those)."""
        if request.configuration.HasField("task_push_notification_config"):
            return False
        return not request.message.task_id or request.message.task_id in self._live

    def has(self, task_id: str) -> bool:
        return task_id in self._live

    async def aclose(self) -> None:
        """Wait for the runners (the executor's `aclose` has stopped their turns), then end
        every stream still open (a parked task's watchers)."""
        runners = [live.runner for live in self._live.values() if live.runner is not None]
        if runners:
            _, pending = await asyncio.wait(runners, timeout=CANCEL_WAIT_S)
            for runner in pending:
                runner.cancel()
        for live in self._live.values():
            live.close_streams(ended=True)

    async def send(self, request: SendMessageRequest, context: ServerCallContext) -> Task:
        """Run the message's turn; the task once it ends or waits for input, or with
        `returnImmediately` at its first event (stored, or working on a follow-up)."""
        live, _ = await self._start(request, context, watch=False)
        assert live.runner is not None
        # asyncio.wait: a caller who goes away does not stop the task.
        if request.configuration.return_immediately:
            progressed = asyncio.ensure_future(live.progressed.wait())
            await asyncio.wait([progressed, live.runner], return_when=asyncio.FIRST_COMPLETED)
            progressed.cancel()
        else:
            await asyncio.wait([live.runner])
        return apply_history_length(_copy(await self._current(live)), request.configuration)

    async def send_streaming(
        self, request: SendMessageRequest, context: ServerCallContext
    ) -> AsyncIterator[Event]:
        """The task's events until it ends or waits for input; a follow-up's stream starts
        with the task as it is, a new task's with the task as first stored."""
        follow_up = bool(request.message.task_id)
        live, queue = await self._start(request, context, watch=True)
        assert queue is not None
        first = _copy(await self._current(live)) if follow_up else None
        return _events(live, queue, first)

    async def subscribe(self, task_id: str, context: ServerCallContext) -> AsyncIterator[Event]:
        """The task as it is, then its events until it ends: a task waiting for input keeps
        the stream open, and its follow-up's events come on it (A2A 1.0, STREAM-SUB-002)."""
        live = self._live[task_id]
        task = await self._store.get(task_id, context)
        if task is None:
            raise TaskNotFoundError()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        if task.status.state in TERMINAL_TASK_STATES:
            queue.put_nowait(None)
        else:
            live.watchers.add(queue)
        return _events(live, queue, _copy(task))

    async def cancel(self, task_id: str, context: ServerCallContext) -> Task:
        """The executor's cancel first, then the runner; CANCELED is forced if still needed."""
        live = self._live[task_id]
        task = await self._store.get(task_id, context)
        if task is None:
            raise TaskNotFoundError()
        live.cancelling = True
        sink = _Sink(live)
        request = RequestContext(
            call_context=context, task_id=task_id, context_id=live.context_id, task=task
        )
        await self._executor.cancel(request, sink)
        if live.runner is not None and not live.runner.done():
            _, pending = await asyncio.wait([live.runner], timeout=CANCEL_WAIT_S)
            for runner in pending:
                runner.cancel()
        if (await self._current(live)).status.state not in TERMINAL_TASK_STATES:
            await TaskUpdater(sink, task_id, live.context_id).cancel()
        self._end(live)
        return await self._current(live)

    async def _start(
        self, request: SendMessageRequest, context: ServerCallContext, watch: bool
    ) -> tuple[_Live, asyncio.Queue[Event | None] | None]:
        """The task's runner started for `request`; with `watch`, a queue that gets every
        event from the first (subscribed before the runner runs)."""
        validate_proto_required_fields(request)
        validate_history_length(request.configuration)
        message = request.message
        live = self._live.get(message.task_id) if message.task_id else None
        if live is None:
            built = await self._builder.build(context, params=request)
            assert built.task_id and built.context_id
            manager = TaskManager(self._store, context, built.task_id, built.context_id, message)
            live = self._live[built.task_id] = _Live(built.task_id, built.context_id, manager)
        else:
            if live.runner is not None and not live.runner.done():
                raise UnsupportedOperationError(
                    message=f"Task {live.task_id} is waiting for its turn; "
                    "send follow-ups once it is working"
                )
            task = await self._current(live)
            live.manager.update_with_message(message, task)
            await self._store.save(task, context)
            built = await self._builder.build(
                context,
                params=request,
                task_id=live.task_id,
                context_id=live.context_id,
                task=task,
            )
        live.progressed.clear()
        queue: asyncio.Queue[Event | None] | None = None
        if watch:
            queue = asyncio.Queue()
            live.subscribers.add(queue)
        live.runner = asyncio.create_task(self._run(live, built), name=f"a2a:{live.task_id}")
        return live, queue

    async def _run(self, live: _Live, request: RequestContext) -> None:
        try:
            await self._executor.execute(request, _Sink(live))
            settled = (await self._current(live)).status.state in SETTLED
            if not settled and not live.cancelling:  # its turn was stopped: the server stops
                await self._fail(live, STOPPED_MESSAGE)
        except Exception:
            log.exception("A2A task %s: the executor failed", live.task_id)
            if (await self._current(live)).status.state not in TERMINAL_TASK_STATES:
                await self._fail(live, FAILED_MESSAGE)
        finally:
            if not live.cancelling:  # else the cancel's own status update ends the streams
                live.close_streams()
            with contextlib.suppress(Exception):
                if (await self._current(live)).status.state in TERMINAL_TASK_STATES:
                    self._end(live)

    async def _fail(self, live: _Live, text: str) -> None:
        updater = TaskUpdater(_Sink(live), live.task_id, live.context_id)
        await updater.failed(updater.new_agent_message([new_text_part(text)]))

    async def _current(self, live: _Live) -> Task:
        task = await live.manager.get_task()
        if task is None:
            raise TaskNotFoundError(message=f"Task {live.task_id} not found")
        return task

    def _end(self, live: _Live) -> None:
        live.close_streams(ended=True)
        self._live.pop(live.task_id, None)


async def _events(
    live: _Live, queue: asyncio.Queue[Event | None], first: Task | None
) -> AsyncIterator[Event]:
    try:
        if first is not None:
            yield first
        while (event := await queue.get()) is not None:
            yield event
    finally:
        live.subscribers.discard(queue)
        live.watchers.discard(queue)


def _copy(task: Task) -> Task:
    """A snapshot: the store's own object changes as the task goes on."""
    snapshot = Task()
    snapshot.CopyFrom(task)
    return snapshot

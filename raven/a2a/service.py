"""The A2A task service: the one owner of every A2A task, new or stored.

Each method of the protocol that names a task comes here (`send`, `stream`, `get`,
`list`, `cancel`, `subscribe`), whichever task it is: one this process runs, one an
earlier run left waiting for input, one another replica runs. A task run here has one
writer (`raven.a2a.live_task`), which hands each change, in order and once, to its
followers; its turn is `raven.a2a.runner`'s; a task another replica runs is followed
and written through the store (`raven.a2a.elsewhere`).

Rules it keeps for every face of the task:
- A terminal state never changes: a write to a finished task is dropped, and a write
  not based on the latest version is refused by the store (the writer reloads and
  learns why).
- A follow-up answers the task's question, steers its running turn, or resumes a task
  whose turn is gone. Sent to a replica that does not run the task, it is written to
  the task and handed to the turn through the runtime (`Runtime.answer`, `steer`),
  which reaches the replica holding the session's claim at once; a cancel is written
  to the task, and the running replica hears of it at once (the store's NOTIFY, which
  the runtime hands on) and stops the turn.
- A task's turn is its conversation's session's: the process running it is the one that
  holds the session's claim (the engine's, renewed with the sessions' `leaseS` when
  replicas share the store), and a task has no lease of its own. A task waits SUBMITTED
  until its turn has the claim, and works from then on; one whose runner is gone, or no
  longer holds the claim, ends FAILED (`raven.a2a.elsewhere`).

Never speaks a wire format (`raven.a2a.routes` does) and never runs a model itself (the
engine does, through `raven.a2a.turn`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskManager, TaskStore
from a2a.types import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size

from raven.a2a.elsewhere import Elsewhere
from raven.a2a.legacy import move_tasks
from raven.a2a.live_task import (
    WRITE_ATTEMPTS,
    Follower,
    LiveTask,
    copy_task,
    stamp,
    status_event,
    working,
)
from raven.a2a.push import Push, PushRefused
from raven.a2a.runner import TaskRunner
from raven.a2a.store import (
    TERMINAL,
    RowsTaskStore,
)
from raven.a2a.turn import Conversations, LocalAsker, reply_value
from raven.config import A2AServerConfig
from raven.deadlines import finish_within
from raven.engine import Runtime, StandIn

log = logging.getLogger(__name__)

STOP_TURN_S = 5.0
"""How long a cancelled task's turn gets to stop before the task is written CANCELED anyway."""


class TaskService:
    def __init__(
        self,
        runtime: Runtime,
        settings: A2AServerConfig,
        store: TaskStore | RowsTaskStore,
        workdir: Path,
        local: LocalAsker | None = None,
        stand_in: StandIn | None = None,
    ) -> None:
        """`stand_in`: the agent answering the tasks' turns in Raven's place (None: Raven)."""
        self._runtime = runtime
        self.workdir = workdir
        self._rows = store if isinstance(store, RowsTaskStore) else None
        self._shared = self._rows is not None and runtime.shared
        """Other replicas may run (and write) the tasks: they are followed through the
        store's events, and a task whose runner no longer holds its session's claim is
        ended (`raven.a2a.elsewhere`)."""
        self.tasks: TaskStore | RowsTaskStore = store
        self.push = (
            Push(settings.push)
            if self._rows is None
            else Push(settings.push, self._rows.rows, self._rows.pushed)
        )
        self._conversations = Conversations(
            runtime, workdir, self.attach, settings.max_file_bytes, stand_in
        )
        self._runner = TaskRunner(runtime, settings, self._conversations, local, self._settle)
        self._live: dict[str, LiveTask] = {}
        self._elsewhere = (
            None
            if self._rows is None
            else Elsewhere(
                self._rows,
                runtime,
                self._live,
                self._write_stored,
                settings.input_timeout_s + runtime.config.sessions.lease_s,
            )
        )

    # -- lifetime ---------------------------------------------------------------------

    async def start(self) -> None:
        """Before serving: hear the replicas sharing the session store, if they do; with
        tasks in the session store, end those whose runner is gone."""
        await self._runtime.start()
        if self._rows is not None:
            if not self._shared:
                await move_tasks(self._runtime.paths.data_dir, self._rows.rows)
            assert self._elsewhere is not None
            await self._elsewhere.start(self._shared)

    async def aclose(self) -> None:
        """Stop following other replicas, stop every turn (a working task ends FAILED, one
        waiting for input stays, to be resumed), then end every stream; each within a
        deadline."""
        self._runner.closing = True
        if self._elsewhere is not None:
            await self._elsewhere.aclose()
        for task in self._live.values():
            task.cancelled.set()
            if task.turn is not None:
                task.turn.cancel()
        work = [t.runner for t in self._live.values() if t.runner is not None]
        await finish_within(work, STOP_TURN_S)
        for task in list(self._live.values()):
            task.close(ended=True)
        await self.push.aclose()

    def attach(self, session_id: str, part: Any) -> bool:
        """Add a file to the answer of the session's running task; False when it has none."""
        for task in self._live.values():
            if task.turn is not None and task.turn.session.id == session_id:
                task.turn.attachments.append(part)
                return True
        return False

    # -- the protocol's methods -------------------------------------------------------

    async def send(
        self, request: SendMessageRequest, context: ServerCallContext, data: list[Any] | None
    ) -> Task:
        """The task once it settles (ends or waits for input), or with `returnImmediately`
        as soon as the message is taken."""
        validate_history_length(request.configuration)
        immediately = request.configuration.return_immediately
        follower = None if immediately else Follower(asyncio.Queue(), False, events=False)
        task, events = await self._take(request, context, data, follower)
        if events is not None:
            async for _ in events:
                pass
            assert follower is not None
            task = follower.ended or await self._current(task.id, context)
        return apply_history_length(task, request.configuration)

    async def stream(
        self, request: SendMessageRequest, context: ServerCallContext, data: list[Any] | None
    ) -> AsyncIterator[Event]:
        """The task as the message left it, then its events until it settles."""
        validate_history_length(request.configuration)
        task, events = await self._take(
            request, context, data, Follower(asyncio.Queue(), through_input=False)
        )
        assert events is not None
        return _first_then(task, events)

    async def subscribe(self, task_id: str, context: ServerCallContext) -> AsyncIterator[Event]:
        """The task as it is, then its events until it ends: a task waiting for input keeps
        the stream open, and its follow-up's events come on it (A2A 1.0, STREAM-SUB-002)."""
        stored, version = await self._stored(task_id, context)
        if stored.status.state in TERMINAL:
            raise _terminal(stored)
        local = self._live.get(task_id)
        if local is not None:
            follower = Follower(asyncio.Queue(), through_input=True)
            async with local.lock:
                snapshot = copy_task(await local.cached())
                local.follow(follower)
            return _first_then(snapshot, local.drain(follower))
        if self._shared:
            assert self._elsewhere is not None
            return _first_then(stored, self._elsewhere.tail(task_id, version, through_input=True))
        return _first_then(stored, _nothing())

    async def get(self, task_id: str, context: ServerCallContext, history: Any) -> Task:
        """The task; without `historyLength`, progress lines are left out of its history."""
        validate_history_length(history)
        task, _ = await self._stored(task_id, context)
        if not history.HasField("history_length"):
            kept = [m for m in task.history if not _is_progress(m)]
            del task.history[:]
            task.history.extend(kept)
        deliveries = await self.push.states(task_id)
        if deliveries:
            raven = task.metadata.get_or_create_struct("raven")
            raven.update({"push": {k: v.as_json() for k, v in deliveries.items()}})
        return apply_history_length(task, history)

    async def list_tasks(
        self, request: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        validate_history_length(request)
        if request.HasField("page_size"):
            validate_page_size(request.page_size)
        page = await self.tasks.list(request, context)
        for task in page.tasks:
            if not request.include_artifacts:
                task.ClearField("artifacts")
            trimmed = apply_history_length(task, request)
            if trimmed is not task:
                task.CopyFrom(trimmed)
        return page

    async def cancel(self, task_id: str, context: ServerCallContext) -> Task:
        """Stop the task's turn (wherever it runs) and end the task CANCELED."""
        stored, _ = await self._stored(task_id, context)
        if stored.status.state in TERMINAL:
            raise TaskNotCancelableError()
        local = self._live.get(task_id)
        if local is not None:
            local.cancelled.set()
            if local.turn is not None:
                local.turn.cancel()
            await local.update(TaskState.TASK_STATE_CANCELED)
            task = copy_task(await local.cached())
            if local.turn is not None and not await local.turn.wait(STOP_TURN_S):
                log.warning("A2A task %s: its turn did not stop in time", task_id)
        else:  # the runner elsewhere sees the CANCELED version and stops its turn
            cancel = status_event(task_id, stored.context_id, TaskState.TASK_STATE_CANCELED)
            task, _ = await self._write_stored(task_id, context, cancel)
        if task.status.state != TaskState.TASK_STATE_CANCELED:
            raise TaskNotCancelableError()
        return task

    # -- push notifications -----------------------------------------------------------

    async def create_push(
        self, config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        await self._stored(config.task_id, context)
        return await self._push_config(config.task_id, config, context)

    async def get_push(
        self, request: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        await self._stored(request.task_id, context)
        config = await self.push.get(request.task_id, request.id, context)
        if config is None:
            raise TaskNotFoundError(
                message=f"Task {request.task_id} has no push config {request.id!r}"
            )
        return config

    async def list_push(
        self, request: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        await self._stored(request.task_id, context)
        configs = await self.push.configs(request.task_id, context)
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def delete_push(
        self, request: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Idempotent: deleting a config that is gone is no error."""
        await self._stored(request.task_id, context)
        await self.push.delete(request.task_id, request.id, context)

    async def _push_config(
        self, task_id: str, config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        try:
            return await self.push.create(task_id, config, context)
        except PushRefused as refused:
            raise InvalidParamsError(message=str(refused)) from None

    # -- taking a message -------------------------------------------------------------

    async def _take(
        self,
        request: SendMessageRequest,
        context: ServerCallContext,
        data: list[Any] | None,
        follower: Follower | None,
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """Start or continue the task for `request.message`: the task as the message left
        it, and (for `follower`) its events from there until it settles."""
        message = request.message
        owner = context.user.user_name
        push = None
        if request.configuration.HasField("task_push_notification_config"):
            push = request.configuration.task_push_notification_config
        if not message.task_id:
            return await self._start(message, owner, data, follower, push)
        stored, _ = await self._stored(message.task_id, context)
        if stored.status.state in TERMINAL:
            raise _terminal(stored)
        if message.context_id and message.context_id != stored.context_id:
            raise InvalidParamsError(
                message=f"Task {message.task_id} belongs to context {stored.context_id}"
            )
        if push is not None:
            await self._push_config(stored.id, push, context)
        message.context_id = stored.context_id
        local = self._live.get(message.task_id)
        if local is not None:
            return await self._follow_up(local, message, data, follower)
        if stored.status.state == TaskState.TASK_STATE_SUBMITTED:
            raise _queued(stored.id)  # as the replica it waits in would say
        if self._rows is not None and await self._rows.rows.tasks_run_elsewhere([stored.id]):
            if not self._shared:  # a process of this machine that would not hear of it
                raise UnsupportedOperationError(
                    message=f"Task {stored.id} runs in another Raven on this machine; "
                    "send the follow-up there"
                )
            return await self._relay(stored, message, context, data, follower)
        return await self._resume(stored, owner, message, data, follower)

    async def _start(
        self,
        message: Message,
        owner: str,
        data: list[Any] | None,
        follower: Follower | None,
        push: TaskPushNotificationConfig | None,
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        message.context_id = message.context_id or self._conversations.minted.generate()
        message.task_id = str(uuid.uuid4())
        task = self._live_task(message.task_id, message.context_id, owner)
        task.fresh = True
        if push is not None:  # before the task is written: its first state is pushed too
            await self._push_config(task.id, push, task.context)
        self._live[task.id] = task
        first = Task(
            id=task.id,
            context_id=task.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            history=[message],
        )
        stamp(first.status)
        session_id = self._conversations.session_id(owner, task.context_id)
        refusal = self._runner.admission.refusal(session_id) if follower is None else None
        if refusal is not None:  # answered REJECTED now, not SUBMITTED then REJECTED later
            try:
                await task.write(first, snapshot=False)
                await task.update(TaskState.TASK_STATE_REJECTED, refusal)
                return await task.cached(), None
            finally:
                await self._settle(task)
        # The turn starts (its session opened and claimed) while the task is written: the
        # write holds the task's lock from here, so what the turn says is written after.
        written = asyncio.ensure_future(task.write(first, follower))
        task.runner = asyncio.create_task(
            self._runner.run(task, message, data, first=True), name=f"a2a:{task.id}"
        )
        try:
            snapshot = await written
        except BaseException:
            task.runner.cancel()
            raise
        return snapshot, task.drain(follower) if follower else None

    async def _follow_up(
        self, task: LiveTask, message: Message, data: list[Any] | None, follower: Follower | None
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """A message to a task running here: its question's answer, or steering."""
        turn = task.turn
        if turn is None or not turn.started:
            raise _queued(task.id)
        prompt = await self._conversations.prompt(message, task.context_id, data)
        parked = (await task.cached()).status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answers = parked and turn.asking
        if not answers and not turn.steer(prompt):
            raise _finishing(task.id)
        snapshot = await task.write(working(task, message), follower)
        if answers:
            turn.answer(prompt)
        return snapshot, task.drain(follower) if follower else None

    async def _resume(
        self,
        stored: Task,
        owner: str,
        message: Message,
        data: list[Any] | None,
        follower: Follower | None,
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """A message to a task whose turn is gone (an earlier run, a replica that stopped):
        a new turn, here, in the task's conversation, which the task waits for again."""
        task = self._live_task(stored.id, stored.context_id, owner)
        self._live[task.id] = task
        waits = status_event(task.id, task.context_id, TaskState.TASK_STATE_SUBMITTED, message)
        try:
            snapshot = await task.write(waits, follower)
        except BaseException:
            self._live.pop(task.id, None)
            raise
        task.runner = asyncio.create_task(
            self._runner.run(task, message, data, first=False), name=f"a2a:{task.id}"
        )
        return snapshot, task.drain(follower) if follower else None

    async def _relay(
        self,
        stored: Task,
        message: Message,
        context: ServerCallContext,
        data: list[Any] | None,
        follower: Follower | None,
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """A message to a task another replica runs: kept in the task, and handed to its
        turn through the runtime, as the answer to the question the task waits on or as
        steering. An answer is written first (the turn then knows the peer gave it); a
        steer is handed on first (a turn that just ended takes none, and the task keeps
        no message nobody took)."""
        session_id = self._conversations.session_id(context.user.user_name, stored.context_id)
        prompt = await self._conversations.prompt(message, stored.context_id, data)
        asking = _asking(stored)
        if asking is None and not await self._runtime.steer(session_id, prompt):
            raise _finishing(stored.id)
        event = status_event(
            message.task_id, message.context_id, TaskState.TASK_STATE_WORKING, message
        )
        task, version = await self._write_stored(message.task_id, context, event)
        if task.status.state in TERMINAL:
            raise _terminal(task)
        if asking is not None:
            request_id, approval = asking
            if not await self._runtime.answer(
                session_id, request_id, reply_value(prompt, approval)
            ):
                raise _finishing(stored.id)
        if follower is None:
            return task, None
        assert self._elsewhere is not None
        return task, self._elsewhere.tail(task.id, version, through_input=False)

    # -- a task run here --------------------------------------------------------------

    def _live_task(self, task_id: str, context_id: str, owner: str) -> LiveTask:
        session_id = self._conversations.session_id(owner, context_id)
        return LiveTask(task_id, context_id, owner, session_id, self.tasks, self.push)

    async def _settle(self, task: LiveTask) -> None:
        """The runner is done: the task leaves this process."""
        self._live.pop(task.id, None)
        task.close(ended=True)

    # -- writing a task run elsewhere ----------------------------------------------

    async def _write_stored(
        self, task_id: str, context: ServerCallContext, event: TaskStatusUpdateEvent
    ) -> tuple[Task, TaskVersion]:
        """Apply `event` to a task this process does not run; the task and its version
        after (as it is, if it ended meanwhile)."""
        manager = TaskManager(self.tasks, context, task_id, event.context_id, None)
        for _ in range(WRITE_ATTEMPTS):
            current = await manager.get_task()
            if current is None:
                raise TaskNotFoundError()
            if current.status.state in TERMINAL:
                return current, manager.current_version
            try:
                task = await manager.save_task_event(event)
            except ConcurrentTaskModificationError:
                manager.invalidate()
                continue
            assert task is not None
            self.push.notify(task_id, event)
            return task, manager.current_version
        raise InternalError(message=f"Task {task_id} keeps changing; try again")

    # -- reading ----------------------------------------------------------------------

    async def _stored(self, task_id: str, context: ServerCallContext) -> tuple[Task, TaskVersion]:
        """The stored task (the caller's own) and its version; TaskNotFoundError if none."""
        if self._rows is not None:
            stored = await self._rows.get(task_id, context)
            if stored is None:
                raise TaskNotFoundError()
            return stored.task, stored.version
        assert isinstance(self.tasks, TaskStore)
        task = await self.tasks.get(task_id, context)  # a copy: the SDK's store makes one
        if task is None:
            raise TaskNotFoundError()
        return task, TaskVersion.MISSING

    async def _current(self, task_id: str, context: ServerCallContext) -> Task:
        local = self._live.get(task_id)
        if local is not None:
            return copy_task(await local.cached())
        task, _ = await self._stored(task_id, context)
        return task


def _queued(task_id: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        message=f"Task {task_id} is waiting for its turn; send follow-ups once it is working"
    )


def _finishing(task_id: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        message=f"Task {task_id} is finishing; send the message again once it ends"
    )


def _asking(task: Task) -> tuple[str, bool] | None:
    """The asking a task waiting for input waits on, as its turn told it: (request id,
    whether it is an approval); None for a task that waits for nothing."""
    if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
        return None
    said = task.status.message
    raven = said.metadata.fields.get("raven") if said.HasField("metadata") else None
    asking = raven.struct_value.fields.get("asking") if raven is not None else None
    if asking is None:
        return None
    fields = asking.struct_value.fields
    return fields["requestId"].string_value, fields["approval"].bool_value


def _terminal(task: Task) -> UnsupportedOperationError:
    state = TaskState.Name(task.status.state)
    return UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {state}")


def _is_progress(message: Message) -> bool:
    raven = message.metadata.fields.get("raven") if message.HasField("metadata") else None
    return bool(raven and raven.struct_value.fields.get("progress", None) is not None)


async def _first_then(first: Task, rest: AsyncIterator[Event]) -> AsyncIterator[Event]:
    try:
        yield first
        async for event in rest:
            yield event
    finally:
        with contextlib.suppress(Exception):
            await rest.aclose()  # type: ignore[attr-defined]


async def _nothing() -> AsyncIterator[Event]:
    return
    yield

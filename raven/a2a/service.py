"""The A2A task service: the one owner of every A2A task, new or stored.

Each method of the protocol that names a task comes here (`send`, `stream`, `get`,
`list`, `cancel`, `subscribe`), whichever task it is: one this process runs, one an
earlier run left waiting for input, one another replica runs. The service writes every
change of a task through the SDK's `TaskManager`, one writer per task, and hands each
change, in order and once, to the task's followers (a send waiting for its answer, a
stream, SubscribeToTask), who start from a snapshot taken under the same lock.

Rules it keeps for every face of the task:
- A terminal state never changes: a write to a finished task is dropped, and with a
  shared store a write not based on the latest version is refused by the store (the
  writer reloads and learns why).
- A follow-up answers the task's question, steers its running turn, or resumes a task
  whose turn is gone; sent to a replica that does not run the task, it is written to
  the store, and the running replica hears of it at once (the store's NOTIFY, which
  the runtime hands on), and so of a cancel.
- In the session store, the process running a task holds it (`TaskRows.hold`, renewed
  with the sessions' `leaseS` when replicas share the store); a task whose holder is
  gone, or whose hold lapsed, ends FAILED within `leaseS` + a third of it.

Never speaks a wire format (`raven.a2a.routes` does) and never runs a model itself (the
engine does, through `raven.a2a.turn`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from a2a.helpers import new_text_part
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskManager, TaskStore
from a2a.types import (
    Artifact,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
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

from raven.a2a.admission import Admission, Admitted
from raven.a2a.auth import Caller
from raven.a2a.legacy import move_tasks
from raven.a2a.push import Push, PushRefused
from raven.a2a.store import (
    HOLDS,
    RUNNING_NAMES,
    SETTLED,
    TERMINAL,
    RowsTaskStore,
    StoreOutage,
)
from raven.a2a.turn import Asked, Chunk, Conversations, Ended, LocalAsker, Progress, TaskTurn
from raven.config import A2AServerConfig
from raven.deadlines import finish_within
from raven.engine import Runtime
from raven.sessions import SharedSessions

log = logging.getLogger(__name__)

PROGRESS_METADATA = {"raven": {"progress": True}}
"""Marks the working-status messages that report progress (GetTask shows them on request)."""
FAILED_MESSAGE = "Raven could not complete this task. The operator can find the details in its log."
STOPPED_MESSAGE = "Raven stopped before this task finished; send it again."
NO_ANSWER = "(no answer: the question timed out)"
ANSWERED_ELSEWHERE = "(answered by a person at Raven)"
STOP_TURN_S = 5.0
"""How long a cancelled task's turn gets to stop before the task is written CANCELED anyway."""
_WRITE_ATTEMPTS = 4


@dataclass
class _Follower:
    queue: asyncio.Queue[Event | None]
    through_input: bool
    """SubscribeToTask's: it goes on through input-required until the task ends; a send's
    stops once the task settles."""
    events: bool = True
    """False for a blocking send, which waits for the end of the stream only."""
    ended: Task | None = None
    """The task as it ended, once it did: it never changes again (no copy is needed)."""


class _Task:
    """A task whose turn this process runs, from its first message (or the follow-up that
    resumed it here) until it settles for good."""

    def __init__(self, task_id: str, context_id: str, owner: str, store: Any) -> None:
        self.id = task_id
        self.context_id = context_id
        self.owner = owner
        # Never the request's headers; its writes hold the task for this process.
        self.context = ServerCallContext(user=Caller(owner), state={HOLDS: True})
        self.manager = TaskManager(store, self.context, task_id, context_id, None)
        self.lock = asyncio.Lock()
        self.followers: list[_Follower] = []
        self.turn: TaskTurn | None = None
        self.runner: asyncio.Task[None] | None = None
        self.cancelled = asyncio.Event()
        self.seen: set[str] = set()
        """Ids of the messages this task's writer knows of."""
        self.artifact_id = uuid.uuid4().hex
        self.streamed = 0
        """Characters of the answer already sent as `response` artifact chunks."""
        self.over = False
        """Terminal: nothing more is written or told."""
        self.fresh = False
        """Not written yet: its first write has nothing to read first."""
        self.ended_here = False
        """Its end was written here (which ended this process's hold on it)."""


class TaskService:
    def __init__(
        self,
        runtime: Runtime,
        settings: A2AServerConfig,
        store: TaskStore | RowsTaskStore,
        workdir: Path,
        local: LocalAsker | None = None,
    ) -> None:
        self._runtime = runtime
        self._settings = settings
        self._rows = store if isinstance(store, RowsTaskStore) else None
        self._shared = self._rows is not None and runtime.shared
        """Other replicas may run (and write) the tasks: they are followed through the
        store's events, and holds lapse unless renewed."""
        self.tasks: TaskStore | RowsTaskStore = store
        self.push = (
            Push(settings.push)
            if self._rows is None
            else Push(settings.push, self._rows.rows, self._rows.pushed)
        )
        self._conversations = Conversations(runtime, workdir, self.attach, settings.max_file_bytes)
        self._local = local
        self._admission = Admission(settings)
        self._live: dict[str, _Task] = {}
        self._heard: dict[str, set[asyncio.Event]] = {}
        """Per task followed from another replica, its tails' events: set when the store
        says it changed."""
        self._keeper: asyncio.Task[None] | None = None
        self._checks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._stopping = asyncio.Event()

    # -- lifetime ---------------------------------------------------------------------

    async def start(self) -> None:
        """Before serving: hear the replicas sharing the session store, if they do; with
        tasks in the session store, end those whose runner is gone."""
        await self._runtime.start()
        if self._rows is not None:
            if not self._shared:
                await move_tasks(self._runtime.paths.data_dir, self._rows.rows)
            await self._sweep()
        if self._shared:
            self._runtime.on_task_change(self._changed)
            self._keeper = asyncio.create_task(self._keep_holds(), name="a2a:holds")

    async def aclose(self) -> None:
        """Stop every turn (a working task ends FAILED, one waiting for input stays, to
        be resumed) and the watcher, then end every stream; each within a deadline."""
        self._closing = True
        self._stopping.set()
        for task in self._live.values():
            task.cancelled.set()
            if task.turn is not None:
                task.turn.cancel()
        work = [t.runner for t in self._live.values() if t.runner is not None]
        work += self._checks
        if self._keeper is not None:
            work.append(self._keeper)  # it stops at `_stopping`, between two renewals
        await finish_within(work, STOP_TURN_S)
        for task in list(self._live.values()):
            self._close(task, ended=True)
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
        follower = None if immediately else _Follower(asyncio.Queue(), False, events=False)
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
            request, context, data, _Follower(asyncio.Queue(), through_input=False)
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
            follower = _Follower(asyncio.Queue(), through_input=True)
            async with local.lock:
                snapshot = _copy(await self._cached(local))
                self._follow(local, follower)
            return _first_then(snapshot, self._drain(local, follower))
        if self._shared:
            return _first_then(stored, self._tail(task_id, version, through_input=True))
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
            await self._update(local, TaskState.TASK_STATE_CANCELED)
            task = _copy(await self._cached(local))
            if local.turn is not None and not await local.turn.wait(STOP_TURN_S):
                log.warning("A2A task %s: its turn did not stop in time", task_id)
        else:  # the runner elsewhere sees the CANCELED version and stops its turn
            cancel = _status(task_id, stored.context_id, TaskState.TASK_STATE_CANCELED)
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
        follower: _Follower | None,
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
        if self._rows is not None and await self._rows.rows.tasks_held_elsewhere([stored.id]):
            if stored.status.state == TaskState.TASK_STATE_SUBMITTED:
                raise _queued(stored.id)  # as its own replica would say
            if not self._shared:  # a process of this machine that would not hear of it
                raise UnsupportedOperationError(
                    message=f"Task {stored.id} runs in another Raven on this machine; "
                    "send the follow-up there"
                )
            return await self._relay(message, context, follower)
        return await self._resume(stored, owner, message, data, follower)

    async def _start(
        self,
        message: Message,
        owner: str,
        data: list[Any] | None,
        follower: _Follower | None,
        push: TaskPushNotificationConfig | None,
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        message.context_id = message.context_id or self._conversations.minted.generate()
        message.task_id = str(uuid.uuid4())
        task = _Task(message.task_id, message.context_id, owner, self.tasks)
        task.fresh = True
        task.seen.add(message.message_id)  # the prompt: never taken again for a follow-up
        if push is not None:  # before the task is written: its first state is pushed too
            await self._push_config(task.id, push, task.context)
        self._live[task.id] = task
        first = Task(
            id=task.id,
            context_id=task.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            history=[message],
        )
        _stamp(first.status)
        snapshot = await self._write(task, first, follower)
        session_id = self._conversations.session_id(owner, task.context_id)
        refusal = self._admission.refusal(session_id) if follower is None else None
        if refusal is not None:  # answered REJECTED now, not SUBMITTED then REJECTED later
            try:
                await self._update(task, TaskState.TASK_STATE_REJECTED, refusal)
                return await self._cached(task), None
            finally:
                await self._settle(task)
        task.runner = asyncio.create_task(
            self._run(task, message, data, first=True), name=f"a2a:{task.id}"
        )
        return snapshot, self._drain(task, follower) if follower else None

    async def _follow_up(
        self, task: _Task, message: Message, data: list[Any] | None, follower: _Follower | None
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """A message to a task running here: its question's answer, or steering."""
        turn = task.turn
        if turn is None:
            raise _queued(task.id)
        prompt = await self._conversations.prompt(message, task.context_id, data)
        parked = (await self._cached(task)).status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answers = parked and turn.asking
        if not answers and not turn.steer(prompt):
            raise UnsupportedOperationError(
                message=f"Task {task.id} is finishing; send the message again once it ends"
            )
        task.seen.add(message.message_id)
        snapshot = await self._write(task, _working(task, message), follower)
        if answers:
            turn.answer(prompt)
        return snapshot, self._drain(task, follower) if follower else None

    async def _resume(
        self,
        stored: Task,
        owner: str,
        message: Message,
        data: list[Any] | None,
        follower: _Follower | None,
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """A message to a task whose turn is gone (an earlier run, a replica that stopped):
        a new turn, here, in the task's conversation."""
        task = _Task(stored.id, stored.context_id, owner, self.tasks)
        task.seen.update(m.message_id for m in stored.history)
        task.seen.add(message.message_id)
        self._live[task.id] = task
        try:
            snapshot = await self._write(task, _working(task, message), follower)
        except BaseException:
            self._live.pop(task.id, None)
            raise
        task.runner = asyncio.create_task(
            self._run(task, message, data, first=False), name=f"a2a:{task.id}"
        )
        return snapshot, self._drain(task, follower) if follower else None

    async def _relay(
        self, message: Message, context: ServerCallContext, follower: _Follower | None
    ) -> tuple[Task, AsyncIterator[Event] | None]:
        """A message to a task another replica runs: written to the store for it."""
        event = _status(message.task_id, message.context_id, TaskState.TASK_STATE_WORKING, message)
        task, version = await self._write_stored(message.task_id, context, event)
        if task.status.state in TERMINAL:
            raise _terminal(task)
        if follower is None:
            return task, None
        return task, self._tail(task.id, version, through_input=False)

    # -- a task's turn ----------------------------------------------------------------

    async def _run(
        self, task: _Task, message: Message, data: list[Any] | None, first: bool
    ) -> None:
        admitted: Admitted | None = None
        session_id: str | None = None
        try:
            session = await self._conversations.open(task.owner, task.context_id, first)
            session_id = session.id
            refusal = self._admission.refusal(session.id)
            if refusal is not None:
                await self._update(task, TaskState.TASK_STATE_REJECTED, refusal)
                return
            admitted = await self._admission.enter(session.id, task.cancelled)
            if admitted is None:
                return  # cancelled while it waited: the cancel wrote CANCELED
            prompt = await self._conversations.prompt(message, task.context_id, data)
            turn = TaskTurn(session, self._local(session.id) if self._local else None)
            turn.start(prompt, self._settings.approvals, self._settings.input_timeout_s)
            task.turn = turn
            await self._update(task, TaskState.TASK_STATE_WORKING)
            await self._publish(task, turn)
        except Exception:
            log.exception("A2A task %s: its turn failed", task.id)
            await self._update(task, TaskState.TASK_STATE_FAILED, FAILED_MESSAGE)
        finally:
            if admitted is not None:
                admitted.leave()
            if session_id is not None:
                self._runtime.release(session_id)
            await self._settle(task)

    async def _publish(self, task: _Task, turn: TaskTurn) -> None:
        """Write what the turn says to the task, until it ends."""
        while True:
            step = await turn.next()
            if task.cancelled.is_set() and not isinstance(step, Ended):
                continue  # a stopped turn's last words (its cancelled tool call) are not told
            if isinstance(step, Chunk):
                await self._artifact(task, step.text, last=False)
            elif isinstance(step, Progress):
                working = TaskState.TASK_STATE_WORKING
                await self._update(task, working, step.text, metadata=PROGRESS_METADATA)
            elif isinstance(step, Asked):
                await self._update(task, TaskState.TASK_STATE_INPUT_REQUIRED, step.text)
                if not await turn.wait_answer(self._settings.input_timeout_s):
                    log.info("A2A task %s: the question timed out unanswered", task.id)
                    if turn.answer(None):
                        await self._update(task, TaskState.TASK_STATE_WORKING, NO_ANSWER)
                elif turn.answered_elsewhere:
                    turn.answered_elsewhere = False
                    await self._update(task, TaskState.TASK_STATE_WORKING, ANSWERED_ELSEWHERE)
            else:
                await self._end(task, turn, step)
                return

    async def _end(self, task: _Task, turn: TaskTurn, end: Ended) -> None:
        if task.cancelled.is_set() and not self._closing:
            return  # the cancel writes CANCELED
        if end.stop == "cancelled" or self._closing:
            current = await self._cached(task)
            if not (self._closing and current.status.state in SETTLED):
                await self._update(task, TaskState.TASK_STATE_FAILED, STOPPED_MESSAGE)
            return
        if end.error:
            log.warning("A2A task %s failed: %s", task.id, end.error)
            await self._update(task, TaskState.TASK_STATE_FAILED, FAILED_MESSAGE)
            return
        reply = end.text or "(no answer)"
        await self._artifact(task, reply[task.streamed :], last=True)
        for part in end.attachments:
            await self._add_artifact(task, part, str(uuid.uuid4()), part.filename)
        await self._update(task, TaskState.TASK_STATE_COMPLETED, reply)

    async def _artifact(self, task: _Task, text: str, last: bool) -> None:
        """Append `text` to the task's one `response` artifact."""
        part = new_text_part(text)
        await self._add_artifact(task, part, task.artifact_id, "response", task.streamed > 0, last)
        task.streamed += len(text)

    async def _add_artifact(
        self,
        task: _Task,
        part: Part,
        artifact_id: str,
        name: str,
        append: bool = False,
        last: bool = False,
    ) -> None:
        artifact = Artifact(artifact_id=artifact_id, name=name, parts=[part])
        event = TaskArtifactUpdateEvent(
            task_id=task.id,
            context_id=task.context_id,
            artifact=artifact,
            append=append,
            last_chunk=last,
        )
        await self._write(task, event, snapshot=False)

    async def _update(
        self, task: _Task, state: int, text: str | None = None, metadata: Any = None
    ) -> None:
        """The task's state becomes `state`, with the agent's message `text` if given."""
        said = None if text is None else _said(task.id, task.context_id, text, metadata)
        await self._write(task, _status(task.id, task.context_id, state, said), snapshot=False)

    async def _settle(self, task: _Task) -> None:
        """The runner is done: the task leaves this process unless it still waits here."""
        self._live.pop(task.id, None)
        if self._rows is not None and not task.ended_here:
            with contextlib.suppress(Exception):
                await self._rows.rows.task_release(task.id)
        self._close(task, ended=True)

    # -- writing and telling ----------------------------------------------------------

    async def _write(
        self, task: _Task, event: Event, follower: _Follower | None = None, snapshot: bool = True
    ) -> Task:
        """Apply `event` to the task, store it and tell the followers; the task as it is
        then (a copy, with `snapshot`), `follower` following from there. A finished task
        is not written."""
        async with task.lock:
            for _ in range(_WRITE_ATTEMPTS):
                current = None if task.fresh else await task.manager.get_task()
                if current is not None and current.status.state in TERMINAL:
                    log.info(
                        "A2A task %s is over; a late %s is dropped", task.id, type(event).__name__
                    )
                    break
                try:
                    assert not isinstance(event, Message)
                    current = await task.manager.save_task_event(event)
                except ConcurrentTaskModificationError:
                    task.fresh = False
                    await self._reload(task)
                    continue
                assert current is not None
                task.fresh = False
                task.ended_here = current.status.state in TERMINAL
                self._tell(task, event, current)
                self.push.notify(task.id, event)
                break
            else:
                raise InternalError(message=f"Task {task.id} keeps changing; try again")
            current = await self._cached(task)
            if follower is not None:
                self._follow(task, follower, current.status.state)
            return _copy(current) if snapshot else current

    def _follow(self, task: _Task, follower: _Follower, state: int | None = None) -> None:
        if task.over or state in TERMINAL or (state in SETTLED and not follower.through_input):
            follower.queue.put_nowait(None)
        else:
            task.followers.append(follower)

    def _tell(self, task: _Task, event: Event, current: Task) -> None:
        """Hand `event` to the followers; `current` is the task after it."""
        told = _copy(event) if isinstance(event, Task) else event  # the store's own changes
        for follower in task.followers:
            if follower.events:
                follower.queue.put_nowait(told)
        if current.status.state in TERMINAL:
            self._close(task, ended=True, final=current)
        elif current.status.state in SETTLED:
            self._close(task, ended=False)

    def _close(self, task: _Task, ended: bool, final: Task | None = None) -> None:
        """End the sends' streams; with `ended`, every follower's (`final`: the task as it
        ended, for them to answer with)."""
        task.over = task.over or ended
        staying = []
        for follower in task.followers:
            if ended or not follower.through_input:
                follower.ended = final
                follower.queue.put_nowait(None)
            else:
                staying.append(follower)
        task.followers = staying

    async def _drain(self, task: _Task, follower: _Follower) -> AsyncIterator[Event]:
        try:
            while (event := await follower.queue.get()) is not None:
                yield event
        finally:
            with contextlib.suppress(ValueError):
                task.followers.remove(follower)

    async def _reload(self, task: _Task) -> None:
        """Another replica wrote the task (under `task.lock`): learn what it did."""
        before = await task.manager.get_task()
        parked = before is not None and before.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        task.manager.invalidate()
        stored = await task.manager.get_task()
        if stored is None or stored.status.state in TERMINAL:
            task.cancelled.set()
            if task.turn is not None:
                task.turn.cancel()
            if stored is not None:
                self._tell(task, _status_of(stored), stored)
            self._close(task, ended=True)
            return
        messages = [
            *stored.history,
            *([stored.status.message] if stored.status.HasField("message") else []),
        ]
        for message in messages:
            if message.role != Role.ROLE_USER or message.message_id in task.seen:
                continue
            task.seen.add(message.message_id)
            if task.turn is None:
                continue
            prompt = await self._conversations.prompt(message, task.context_id, None)
            if not (parked and task.turn.answer(prompt)):
                task.turn.steer(prompt)
            parked = False

    async def _write_stored(
        self, task_id: str, context: ServerCallContext, event: TaskStatusUpdateEvent
    ) -> tuple[Task, TaskVersion]:
        """Apply `event` to a task this process does not run; the task and its version
        after (as it is, if it ended meanwhile)."""
        manager = TaskManager(self.tasks, context, task_id, event.context_id, None)
        for _ in range(_WRITE_ATTEMPTS):
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
            return _copy(await self._cached(local))
        task, _ = await self._stored(task_id, context)
        return task

    async def _cached(self, task: _Task) -> Task:
        current = await task.manager.get_task()
        if current is None:
            raise TaskNotFoundError(message=f"Task {task.id} not found")
        return current

    async def _tail(
        self, task_id: str, after: TaskVersion, through_input: bool
    ) -> AsyncIterator[Event]:
        """The events another replica writes for the task, after version `after`: read
        each time the store says the task changed (or may have)."""
        assert self._rows is not None
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

    # -- tasks in the session store --------------------------------------------------

    def _changed(self, task_id: str | None) -> None:
        """The store says another replica wrote the task (None: any may have changed):
        its followers here read it, and its runner, if here, learns what was written."""
        tails = self._heard.values() if task_id is None else [self._heard.get(task_id, set())]
        for events in tails:
            for event in events:
                event.set()
        live = self._live.values() if task_id is None else [self._live.get(task_id)]
        for task in live:
            if task is not None:
                check = asyncio.create_task(self._check(task))
                self._checks.add(check)
                check.add_done_callback(self._checks.discard)

    async def _keep_holds(self) -> None:
        """Every third of a lease: renew this process's holds and end the lapsed tasks."""
        assert self._rows is not None
        every = cast(SharedSessions, self._runtime.store).lease_s / 3
        outage = StoreOutage(log, "A2A: keeping the tasks run here")
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(every):
                    await self._stopping.wait()
                    return
            try:
                await self._rows.rows.task_renew(list(self._live))
                await self._sweep()
            except Exception as exc:
                outage.failed(exc)
            else:
                outage.worked()

    async def _check(self, task: _Task) -> None:
        assert self._rows is not None
        try:
            async with task.lock:
                if task.over or task.manager.current_version.is_missing:
                    return  # not written yet
                stored = await self._rows.get(task.id, task.context)
                if stored is not None and stored.version != task.manager.current_version:
                    await self._reload(task)
        except Exception:
            log.exception("A2A task %s: reading another replica's write failed", task.id)

    async def _sweep(self) -> None:
        """End FAILED every submitted or working task no live process holds."""
        assert self._rows is not None
        ended = 0
        for task_id, owner in await self._rows.rows.tasks_unheld(RUNNING_NAMES):
            if task_id in self._live:
                continue
            context = ServerCallContext(user=Caller(owner))
            stored = await self._rows.get(task_id, context)
            if stored is None or stored.task.status.state in TERMINAL:
                continue
            context_id = stored.task.context_id
            said = _said(task_id, context_id, STOPPED_MESSAGE)
            failed = _status(task_id, context_id, TaskState.TASK_STATE_FAILED, said)
            await self._write_stored(task_id, context, failed)
            ended += 1
        if ended:
            log.warning("%d A2A task(s) whose Raven stopped ended failed", ended)


def _working(task: _Task, message: Message) -> TaskStatusUpdateEvent:
    """The task works again, on `message` (which goes into its history)."""
    return _status(task.id, task.context_id, TaskState.TASK_STATE_WORKING, message)


def _status(
    task_id: str, context_id: str, state: int, message: Message | None = None
) -> TaskStatusUpdateEvent:
    """The task's state becomes `state` now, with `message` (into its history next time)."""
    event = TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state, message=message),  # type: ignore[arg-type]
    )
    _stamp(event.status)
    return event


def _said(task_id: str, context_id: str, text: str, metadata: Any = None) -> Message:
    """The agent's message `text` in the task."""
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[new_text_part(text)],
        metadata=metadata,
    )


def _stamp(status: TaskStatus) -> None:
    """`status.timestamp` is now, to the microsecond (`GetCurrentTime` without its round trip
    through `datetime`)."""
    status.timestamp.FromMicroseconds(time.time_ns() // 1000)


def _queued(task_id: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        message=f"Task {task_id} is waiting for its turn; send follow-ups once it is working"
    )


def _terminal(task: Task) -> UnsupportedOperationError:
    state = TaskState.Name(task.status.state)
    return UnsupportedOperationError(message=f"Task {task.id} is in terminal state: {state}")


def _status_of(task: Task) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)


def _state(event: Event) -> int | None:
    if isinstance(event, Task | TaskStatusUpdateEvent):
        return event.status.state
    return None


def _is_progress(message: Message) -> bool:
    raven = message.metadata.fields.get("raven") if message.HasField("metadata") else None
    return bool(raven and raven.struct_value.fields.get("progress", None) is not None)


def _copy(task: Task) -> Task:
    """A snapshot: the writer's own object changes as the task goes on."""
    snapshot = Task()
    snapshot.CopyFrom(task)
    return snapshot


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

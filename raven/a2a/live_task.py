"""A task this process runs: its one writer and its followers.

`LiveTask.write` applies each change of the task through the SDK's `TaskManager`, under
the task's lock, and hands it, in order and once, to the task's followers (a send
waiting for its answer, a stream, SubscribeToTask), who start from a snapshot taken
under the same lock. A terminal state never changes: a write to a finished task is
dropped, and a write the store refuses as stale (another replica wrote the task: a
follow-up it took, or the task's end) is retried once the writer has read what was
written (`reload`). What a follow-up says reaches the turn through the runtime, not
through the task. Never runs a turn and never speaks a wire format.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from a2a.helpers import new_text_part
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import TaskManager
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InternalError, TaskNotFoundError

from raven.a2a.auth import Caller
from raven.a2a.push import Push
from raven.a2a.store import AHEAD, RUNS, SETTLED, TERMINAL, version_number
from raven.a2a.turn import TaskTurn

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 4
"""Writes of one change, each after learning what another replica wrote meanwhile."""


@dataclass
class Follower:
    queue: asyncio.Queue[Event | None]
    through_input: bool
    """SubscribeToTask's: it goes on through input-required until the task ends; a send's
    stops once the task settles."""
    events: bool = True
    """False for a blocking send, which waits for the end of the stream only."""
    ended: Task | None = None
    """The task as it ended, once it did: it never changes again (no copy is needed)."""


class LiveTask:
    """A task whose turn this process runs, from its first message (or the follow-up that
    resumed it here) until it settles for good."""

    def __init__(
        self,
        task_id: str,
        context_id: str,
        owner: str,
        session_id: str,
        store: Any,
        push: Push,
    ) -> None:
        self.id = task_id
        self.context_id = context_id
        self.owner = owner
        # Never the request's headers; its writes say this process runs the task, in the
        # turns of the conversation's session.
        self.context = ServerCallContext(user=Caller(owner), state={RUNS: session_id})
        self.manager = TaskManager(store, self.context, task_id, context_id, None)
        self._push = push
        self.lock = asyncio.Lock()
        self.followers: list[Follower] = []
        self.turn: TaskTurn | None = None
        self.runner: asyncio.Task[None] | None = None
        self.cancelled = asyncio.Event()
        self.artifact_id = uuid.uuid4().hex
        self.streamed = 0
        """Characters of the answer already sent as `response` artifact chunks."""
        self.over = False
        """Terminal: nothing more is written or told."""
        self.fresh = False
        """Not written yet: its first write has nothing to read first."""
        self._writing: int | None = None
        """While a write is under way: the version it gives the task if it wins."""

    # -- writing ----------------------------------------------------------------------

    async def write(
        self,
        event: Event,
        follower: Follower | None = None,
        snapshot: bool = True,
        ahead: Sequence[TaskArtifactUpdateEvent] = (),
    ) -> Task:
        """Apply `event` to the task, store it and tell the followers; the task as it is
        then (a copy, with `snapshot`), `follower` following from there. A finished task
        is not written. `ahead`: artifact updates that come first, applied and stored
        with `event` in its one write (each keeps a version of its own)."""
        events = [*ahead, event]
        async with self.lock:
            for _ in range(WRITE_ATTEMPTS):
                current = None if self.fresh else await self.manager.get_task()
                if current is not None and current.status.state in TERMINAL:
                    log.info(
                        "A2A task %s is over; a late %s is dropped", self.id, type(event).__name__
                    )
                    break
                try:
                    self._writing = version_number(self.manager.current_version) + len(events)
                    current = await self._save(event, ahead)
                except ConcurrentTaskModificationError:
                    self.fresh = False
                    await self.reload()
                    continue
                finally:
                    self._writing = None
                assert current is not None
                self.fresh = False
                for told in events:
                    self._hand(told)
                    self._push.notify(self.id, told)
                self._settle(current)
                break
            else:
                raise InternalError(message=f"Task {self.id} keeps changing; try again")
            current = await self.cached()
            if follower is not None:
                self.follow(follower, current.status.state)
            return copy_task(current) if snapshot else current

    def wrote(self, version: int) -> bool:
        """The store's word that the task is at `version` tells nothing new: the writer here
        wrote it (or a later one), or is writing it (the NOTIFY of a write may come before
        its answer; another replica's write up to that version makes this one fail, stale,
        and be read)."""
        if version <= 0:
            return False
        if self._writing is not None and version <= self._writing:
            return True
        current = self.manager.current_version
        return not current.is_missing and version <= version_number(current)

    async def update(
        self,
        state: int,
        text: str | None = None,
        metadata: Any = None,
        ahead: Sequence[TaskArtifactUpdateEvent] = (),
    ) -> None:
        """The task's state becomes `state`, with the agent's message `text` if given (and
        the artifact updates `ahead` first, in the same write)."""
        said = None if text is None else agent_said(self.id, self.context_id, text, metadata)
        event = status_event(self.id, self.context_id, state, said)
        await self.write(event, snapshot=False, ahead=ahead)

    async def answer_chunk(self, text: str, last: bool) -> None:
        """Append `text` to the task's one `response` artifact."""
        await self.write(self.chunk(text, last), snapshot=False)

    def chunk(self, text: str, last: bool) -> TaskArtifactUpdateEvent:
        """The update appending `text` to the task's one `response` artifact (counted as
        streamed from now on: write it)."""
        event = self.artifact(new_text_part(text), self.artifact_id, "response", self.streamed > 0)
        event.last_chunk = last
        self.streamed += len(text)
        return event

    def artifact(
        self, part: Part, artifact_id: str, name: str, append: bool = False
    ) -> TaskArtifactUpdateEvent:
        """The update adding `part` to the task's artifact `artifact_id`."""
        return TaskArtifactUpdateEvent(
            task_id=self.id,
            context_id=self.context_id,
            artifact=Artifact(artifact_id=artifact_id, name=name, parts=[part]),
            append=append,
        )

    async def cached(self) -> Task:
        current = await self.manager.get_task()
        if current is None:
            raise TaskNotFoundError(message=f"Task {self.id} not found")
        return current

    async def reload(self) -> None:
        """Another replica wrote the task (under `lock`): read it; if it ended (a cancel),
        stop its turn and tell the followers."""
        self.manager.invalidate()
        stored = await self.manager.get_task()
        if stored is None or stored.status.state in TERMINAL:
            self.cancelled.set()
            if self.turn is not None:
                self.turn.cancel()
            if stored is not None:
                self._tell(status_of(stored), stored)
            self.close(ended=True)

    async def peer_replied(self) -> bool:
        """Whether the task's question was answered by the peer through another replica,
        which wrote the peer's reply to the task before handing it to the turn."""
        async with self.lock:
            await self.reload()
            current = await self.manager.get_task()
        if current is None or current.status.state != TaskState.TASK_STATE_WORKING:
            return False
        return current.status.message.role == Role.ROLE_USER

    # -- telling ----------------------------------------------------------------------

    def follow(self, follower: Follower, state: int | None = None) -> None:
        if self.over or state in TERMINAL or (state in SETTLED and not follower.through_input):
            follower.queue.put_nowait(None)
        else:
            self.followers.append(follower)

    def close(self, ended: bool, final: Task | None = None) -> None:
        """End the sends' streams; with `ended`, every follower's (`final`: the task as it
        ended, for them to answer with)."""
        self.over = self.over or ended
        staying = []
        for follower in self.followers:
            if ended or not follower.through_input:
                follower.ended = final
                follower.queue.put_nowait(None)
            else:
                staying.append(follower)
        self.followers = staying

    async def drain(self, follower: Follower) -> AsyncIterator[Event]:
        try:
            while (event := await follower.queue.get()) is not None:
                yield event
        finally:
            with contextlib.suppress(ValueError):
                self.followers.remove(follower)

    async def _save(self, event: Event, ahead: Sequence[TaskArtifactUpdateEvent]) -> Task | None:
        """`ahead`, then `event`, applied to the task and stored in one write (the store is
        told of `ahead` through the call's state, `AHEAD`)."""
        assert not isinstance(event, Message)
        if not ahead:
            return await self.manager.save_task_event(event)
        task = await self.manager.ensure_task(event)
        for update in ahead:
            append_artifact_to_task(task, update)  # the manager's own task, in place
        self.context.state[AHEAD] = ahead
        try:
            return await self.manager.save_task_event(event)
        finally:
            del self.context.state[AHEAD]

    def _tell(self, event: Event, current: Task) -> None:
        """Hand `event` to the followers; `current` is the task after it."""
        self._hand(event)
        self._settle(current)

    def _hand(self, event: Event) -> None:
        told = copy_task(event) if isinstance(event, Task) else event  # the store's own changes
        for follower in self.followers:
            if follower.events:
                follower.queue.put_nowait(told)

    def _settle(self, current: Task) -> None:
        """The followers' stream ends with a task that has ended or waits (`current`)."""
        if current.status.state in TERMINAL:
            self.close(ended=True, final=current)
        elif current.status.state in SETTLED:
            self.close(ended=False)


def working(task: LiveTask, message: Message) -> TaskStatusUpdateEvent:
    """The task works again, on `message` (which goes into its history)."""
    return status_event(task.id, task.context_id, TaskState.TASK_STATE_WORKING, message)


def status_event(
    task_id: str, context_id: str, state: int, message: Message | None = None
) -> TaskStatusUpdateEvent:
    """The task's state becomes `state` now, with `message` (into its history next time)."""
    event = TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state, message=message),  # type: ignore[arg-type]
    )
    stamp(event.status)
    return event


def agent_said(task_id: str, context_id: str, text: str, metadata: Any = None) -> Message:
    """The agent's message `text` in the task."""
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[new_text_part(text)],
        metadata=metadata,
    )


def stamp(status: TaskStatus) -> None:
    """`status.timestamp` is now, to the microsecond (`GetCurrentTime` without its round trip
    through `datetime`)."""
    status.timestamp.FromMicroseconds(time.time_ns() // 1000)


def status_of(task: Task) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=task.status)


def copy_task(task: Task) -> Task:
    """A snapshot: the writer's own object changes as the task goes on."""
    snapshot = Task()
    snapshot.CopyFrom(task)
    return snapshot

"""One inbound A2A task = one Raven turn.

The turn runs in a job of its own, so that a question can park the task in
input-required (`execute` returns, as the SDK requires) while the turn waits; a
follow-up message with the same task id answers it and `execute` resumes
publishing. Failures reach the peer as a fixed safe message; details go to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from a2a.helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState, TaskStatus

from raven.a2a.attach import AttachSource
from raven.a2a.parts import prompt_text
from raven.a2a_parts import safe_name
from raven.config import A2AServerConfig
from raven.engine import (
    AgentText,
    ApprovalRequest,
    Asker,
    Decision,
    LiveSession,
    PlanUpdated,
    Question,
    Runtime,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
    Unanswered,
    preview_lines,
    run_turn,
)
from raven.messages import TextPart
from raven.redact import redact

log = logging.getLogger(__name__)

PROGRESS_METADATA = {"raven": {"progress": True}}
"""Marks the working-status messages that report progress (GetTask shows them on request)."""
INBOX = "inbox"
"""Under the working directory: one folder per conversation for the files peers send."""
STREAM_INTERVAL_S = 0.25
"""Answer text reaches peers as artifact chunks at most this often."""
FAILED_MESSAGE = "Raven could not complete this task. The operator can find the details in its log."
STOPPED_MESSAGE = "Raven stopped before this task finished; send it again."
NO_ANSWER = "(no answer: the question timed out)"
_YES = {"y", "yes", "allow", "ok", "approve", "approved"}
_ALWAYS = {"a", "always", "allow always"}

TimeoutAnswer = Callable[[str, str, ServerCallContext], Awaitable[None]]


@dataclass
class _Question:
    text: str
    answer: asyncio.Future[str | None]


@dataclass
class _Done:
    stop: str
    text: str
    error: str | None


@dataclass
class _Steered:
    """A follow-up message the running turn took as steering; it joins the task's history."""

    message: Message


@dataclass
class _Progress:
    """A line of progress for the peer: a tool call started or ended, the plan changed."""

    text: str


@dataclass
class _Chunk:
    """Answer text generated since the last chunk, for the `response` artifact."""

    text: str


@dataclass
class _Conversation:
    """One context's turn, taken by its tasks one at a time, in arrival order."""

    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


@dataclass
class _Job:
    task_id: str
    context_id: str
    session: LiveSession
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    events: asyncio.Queue[_Question | _Chunk | _Steered | _Progress | _Done] = field(
        default_factory=asyncio.Queue
    )
    pending: _Question | None = None
    turn: asyncio.Task[None] | None = None
    call_context: ServerCallContext | None = None
    timer: asyncio.Task[None] | None = None
    resuming: bool = False
    """The question timed out and was answered with "no answer"; the next execute resumes."""
    conversation: _Conversation | None = None
    holds_conversation: bool = False
    """The job's turn is its conversation's; the next task waits until this one ends."""
    artifact_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    attachments: list[Part] = field(default_factory=list)
    """Files the turn attached for the peer (`attach_file`)."""
    streamed: int = 0
    """Characters of the answer already published as `response` artifact chunks."""


class _Throttle:
    """Gathers answer text and queues it as one `_Chunk` at most every `interval_s`."""

    def __init__(self, job: _Job, interval_s: float) -> None:
        self._job = job
        self._interval_s = interval_s
        self._buffer: list[str] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, text: str) -> None:
        self._buffer.append(text)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval_s, self._flush)

    def stop(self) -> None:
        """Drop what is buffered: the turn's end publishes the rest."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _flush(self) -> None:
        self._timer = None
        if self._buffer:
            self._job.events.put_nowait(_Chunk("".join(self._buffer)))
            self._buffer.clear()


LocalAsker = Callable[[str], Asker | None]
"""For a session id, an asker that reaches people right here (the gateway's UIs), if any."""
LOCAL_WINDOW_S = 60.0
"""How long people right here get to answer before the task parks for the peer."""


class _JobAsker:
    """Asks the people at hand first (on the gateway, its UIs), then the peer through the
    task: a question the peer must answer parks the task in input-required."""

    def __init__(self, job: _Job, local: Asker | None) -> None:
        self._job = job
        self._local = local

    async def approve(self, request: ApprovalRequest) -> Decision | Unanswered:
        if self._local is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOCAL_WINDOW_S):
                    return await self._local.approve(request)
        shown = "\n".join(preview_lines(request.preview)) if request.preview else ""
        asked = f"Allow {request.title}?" + (f"\n{shown}\n" if shown else " ")
        answer = await self._ask(asked + "Answer yes, always, or no.")
        if answer is None:
            return "unanswered"
        word = answer.strip().lower().rstrip(".!")
        if word in _ALWAYS:
            return "allow_always"
        return "allow_once" if word in _YES else "reject_once"

    async def ask(self, question: Question) -> str | None:
        if self._local is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LOCAL_WINDOW_S):
                    return await self._local.ask(question)
        text = question.text
        if question.choices:
            text += "\nChoices: " + "; ".join(question.choices)
        return await self._ask(text)

    async def _ask(self, text: str) -> str | None:
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._job.pending = _Question(redact(text), future)
        self._job.events.put_nowait(self._job.pending)
        try:
            return await future
        finally:
            self._job.pending = None


class MintedContexts(IDGenerator):
    """Context ids this server minted for messages that came without one.

    A minted context cannot have a session yet, so its first turn skips the lookup.
    """

    MAX_REMEMBERED = 4096

    def __init__(self) -> None:
        self._fresh: dict[str, None] = {}

    def generate(self, context: IDGeneratorContext) -> str:
        if len(self._fresh) >= self.MAX_REMEMBERED:
            self._fresh.pop(next(iter(self._fresh)))
        context_id = str(uuid.uuid4())
        self._fresh[context_id] = None
        return context_id

    def take(self, context_id: str) -> bool:
        """True once for a context id this generator minted."""
        return self._fresh.pop(context_id, False) is None


class RavenExecutor(AgentExecutor):
    def __init__(
        self,
        runtime: Runtime,
        settings: A2AServerConfig,
        workdir: Path,
        local: LocalAsker | None = None,
    ) -> None:
        self._runtime = runtime
        self._settings = settings
        self._workdir = workdir
        self._local = local
        self._jobs: dict[str, _Job] = {}
        self._conversations: dict[str, _Conversation] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent_tasks)
        self._waiting = 0
        self.context_ids = MintedContexts()
        self._attach_tool = AttachSource(self.attach, settings.max_file_bytes)
        """Hand this to the request handler's context builder."""
        self.on_question_timeout: TimeoutAnswer | None = None
        """Answers a parked task with "no answer" through the request handler (set by the mount)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        job = self._jobs.get(context.task_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        if job is not None and job.pending is not None:
            self._cancel_timer(job)
            job.pending.answer.set_result(await self._prompt(context.message, job.context_id))
        elif job is not None and job.resuming:
            job.resuming = False
        else:
            if self._waiting >= self._settings.max_queued_tasks and self._slots.locked():
                await _reject(updater, "Raven is busy: too many tasks are waiting. Try later.")
                return
            started = await self._start(context)
            if isinstance(started, str):
                await _reject(updater, started)
                return
            if started is None:
                return  # cancelled while it waited its turn
            job = started
        job.call_context = context.call_context
        await updater.start_work()
        await self._publish(job, updater)

    def steer(self, task_id: str, message: Message) -> bool:
        """Hand a follow-up message to the task's running turn (not one waiting for an answer);
        False when there is no such turn. The model sees it at its next step."""
        job = self._jobs.get(task_id)
        if job is None or job.pending is not None or job.resuming or job.turn is None:
            return False
        inbox = self._workdir / INBOX / safe_name(job.context_id, set())
        if job.turn.done() or not job.session.steer(prompt_text(message, inbox)):
            return False
        job.events.put_nowait(_Steered(message))
        return True

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        job = self._jobs.pop(context.task_id or "", None)
        if job is not None:
            job.cancel.set()
            self._cancel_timer(job)
            if job.turn is not None:
                await asyncio.wait([job.turn], timeout=5)
                self._runtime.release(job.session.id)
                self._end_conversation_turn(job)
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    async def aclose(self) -> None:
        for job in list(self._jobs.values()):
            job.cancel.set()
            self._cancel_timer(job)
        turns = [j.turn for j in self._jobs.values() if j.turn is not None]
        if turns:
            await asyncio.wait(turns, timeout=5)

    async def _start(self, context: RequestContext) -> _Job | str | None:
        """A job whose turn has started: once the tasks before it in its conversation have
        ended (arrival order) and a slot is free. A reason to reject it when its
        conversation's queue is full; None when it was cancelled while it waited."""
        assert context.task_id and context.context_id
        session = await self._session(context)
        conversation = self._conversations.setdefault(session.id, _Conversation())
        if conversation.waiting >= self._settings.max_queued_per_context:
            limit = self._settings.max_queued_per_context
            return (
                f"This conversation already has {limit} tasks waiting behind the running "
                "one; wait for them to finish, or start another conversation."
            )
        job = _Job(context.task_id, context.context_id, session, conversation=conversation)
        self._jobs[job.task_id] = job
        conversation.waiting += 1
        try:
            if not await _take(conversation.turn, job.cancel):
                return None
            job.holds_conversation = True
            self._waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self._waiting -= 1
        except BaseException:
            self._jobs.pop(job.task_id, None)
            self._end_conversation_turn(job)
            raise
        finally:
            conversation.waiting -= 1
        prompt = await self._prompt(context.message, job.context_id)
        job.turn = asyncio.create_task(self._run(job, prompt), name=f"a2a:{job.task_id}")
        return job

    def _end_conversation_turn(self, job: _Job) -> None:
        """Let the next task of the job's conversation start (once per job)."""
        if job.holds_conversation and job.conversation is not None:
            job.holds_conversation = False
            job.conversation.turn.release()
            if not job.conversation.turn.locked() and not job.conversation.waiting:
                self._conversations.pop(job.session.id, None)

    async def _run(self, job: _Job, prompt: str) -> None:
        text: list[str] = []
        ended: list[TurnEnded] = []
        throttle = _Throttle(job, STREAM_INTERVAL_S)

        titles: dict[str, str] = {}

        def emit(event: TurnEvent) -> None:
            if isinstance(event, AgentText):  # pieces the engine cut whole: each masked alone
                piece = redact(event.text)
                text.append(piece)
                throttle.add(piece)
            elif isinstance(event, TurnEnded):
                throttle.stop()
                ended.append(event)
            elif (line := _progress_line(event, titles)) is not None:
                job.events.put_nowait(_Progress(redact(line)))

        try:
            stop = await run_turn(
                job.session,
                [TextPart(text=prompt)],
                _JobAsker(job, self._local(job.session.id) if self._local else None),
                emit,
                job.cancel,
                approvals=self._settings.approvals,  # the engine applies it, after the mode's
            )
            error = ended[-1].error if ended else None
            job.events.put_nowait(_Done(stop, "".join(text), error))
        except Exception:
            log.exception("A2A task %s: the turn failed", job.task_id)
            job.events.put_nowait(_Done("end_turn", "", "internal error"))
        finally:
            throttle.stop()
            self._slots.release()

    async def _publish(self, job: _Job, updater: TaskUpdater) -> None:
        """Publish answer chunks, then the job's next stop: a question (task parks) or the end."""
        event = await job.events.get()
        while isinstance(event, _Chunk | _Steered | _Progress):
            if isinstance(event, _Chunk):
                await self._artifact(job, updater, event.text, last=False)
            elif isinstance(event, _Steered):
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=event.message)
            else:
                message = updater.new_agent_message(
                    [new_text_part(event.text)], metadata=PROGRESS_METADATA
                )
                await updater.update_status(TaskState.TASK_STATE_WORKING, message=message)
            event = await job.events.get()
        if isinstance(event, _Question):
            await updater.requires_input(updater.new_agent_message([new_text_part(event.text)]))
            job.timer = asyncio.create_task(self._time_out(job))
            return
        self._jobs.pop(job.task_id, None)
        self._runtime.release(job.session.id)
        self._end_conversation_turn(job)
        if event.stop == "cancelled":
            return
        if event.error:
            log.warning("A2A task %s failed: %s", job.task_id, event.error)
            await updater.failed(updater.new_agent_message([new_text_part(FAILED_MESSAGE)]))
            return
        reply = event.text or "(no answer)"
        await self._artifact(job, updater, reply[job.streamed :] if job.streamed else reply, True)
        for part in job.attachments:
            await updater.add_artifact([part], name=part.filename)
        await updater.complete(updater.new_agent_message([new_text_part(reply)]))

    async def _artifact(self, job: _Job, updater: TaskUpdater, text: str, last: bool) -> None:
        """Append `text` to the task's one `response` artifact."""
        await updater.add_artifact(
            [new_text_part(text)],
            artifact_id=job.artifact_id,
            name="response",
            append=job.streamed > 0,
            last_chunk=last,
        )
        job.streamed += len(text)

    async def _time_out(self, job: _Job) -> None:
        await asyncio.sleep(self._settings.input_timeout_s)
        if job.pending is None or self.on_question_timeout is None or job.call_context is None:
            return
        log.info("A2A task %s: the question timed out unanswered", job.task_id)
        job.timer = None
        job.resuming = True
        job.pending.answer.set_result(None)
        await self.on_question_timeout(job.task_id, job.context_id, job.call_context)

    def _cancel_timer(self, job: _Job) -> None:
        if job.timer is not None and job.timer is not asyncio.current_task():
            job.timer.cancel()
        job.timer = None

    async def _session(self, context: RequestContext) -> LiveSession:
        assert context.context_id
        owner = context.call_context.user.user_name if context.call_context else ""
        digest = hashlib.sha256(f"{owner}\0{context.context_id}".encode()).hexdigest()[:32]
        if not self._workdir.is_dir():
            self._workdir.mkdir(parents=True, exist_ok=True)
        session_id = f"a2a_{digest}"
        if context.current_task is None and self.context_ids.take(context.context_id):
            live = await self._runtime.new_session(
                self._workdir, session_id=session_id, deferred=True
            )
        else:
            live = await self._runtime.open_session(
                session_id, create_in=self._workdir, reopen=True
            )
        live.attach_tools(self._attach_tool)
        return live

    async def _prompt(self, message: Message | None, context_id: str) -> str:
        """The peer's message as a prompt; its inline files land in the context's inbox."""
        if message is None:
            return ""
        inbox = self._workdir / INBOX / safe_name(context_id, set())
        if any(p.WhichOneof("content") == "raw" for p in message.parts):
            return await asyncio.to_thread(prompt_text, message, inbox)  # files to write
        return prompt_text(message, inbox)

    def attach(self, session_id: str, part: Part) -> bool:
        """Add `part` to the running task of the session; False when it has none."""
        job = next((j for j in self._jobs.values() if j.session.id == session_id), None)
        if job is None:
            return False
        job.attachments.append(part)
        return True


def _progress_line(event: TurnEvent, titles: dict[str, str]) -> str | None:
    """What a peer is told of a turn event while the task works: titles and states only,
    never a tool's arguments or output."""
    if isinstance(event, ToolCallStarted):
        titles[event.call_id] = event.title
        return f"→ {event.title}"
    if isinstance(event, ToolCallUpdated) and event.status != "in_progress":
        mark = "✓" if event.status == "completed" else "✗"
        return f"{mark} {titles.get(event.call_id, event.call_id)}"
    if isinstance(event, PlanUpdated):
        marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
        return "Plan:\n" + "\n".join(f"{marks[s.status]} {s.content}" for s in event.steps)
    return None


async def _take(lock: asyncio.Lock, cancelled: asyncio.Event) -> bool:
    """Acquire `lock` in its turn unless `cancelled` is set first; True when it is held."""
    wanted = asyncio.ensure_future(lock.acquire())
    stop = asyncio.ensure_future(cancelled.wait())
    held = False
    try:
        await asyncio.wait([wanted, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not wanted.done():
            wanted.cancel()
        elif not wanted.cancelled():
            held = not (cancelled.is_set() or _being_cancelled())
            if not held:
                lock.release()
    return held


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _reject(updater: TaskUpdater, text: str) -> None:
    await updater.reject(updater.new_agent_message([new_text_part(text)]))

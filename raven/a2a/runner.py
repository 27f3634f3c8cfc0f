"""A task's turn: from the task's message to its end, written to the task as it goes.

`TaskRunner.run` opens the conversation's session, waits for a turn slot
(`raven.a2a.admission`), runs the turn (`raven.a2a.turn.TaskTurn`) and writes what it
says to the task through its writer (`raven.a2a.live_task.LiveTask`): that it works
(once the turn holds its session's claim), answer chunks, progress lines, a question
(input-required, then an answer or its timing out) and the end. A task waits for its
turn (a slot, then the claim) at most `inputTimeoutS`; then it fails, and every replica
can tell one that waits longer was left behind. Never takes a peer's message and never
speaks a wire format.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.types import Message, TaskState

from raven.a2a.admission import Admission, Admitted
from raven.a2a.live_task import LiveTask
from raven.a2a.store import SETTLED
from raven.a2a.turn import (
    Asked,
    Chunk,
    Conversations,
    Ended,
    LocalAsker,
    Progress,
    Started,
    TaskTurn,
)
from raven.config import A2AServerConfig
from raven.engine import Runtime

log = logging.getLogger(__name__)

PROGRESS_METADATA = {"raven": {"progress": True}}
"""Marks the working-status messages that report progress (GetTask shows them on request)."""
FAILED_MESSAGE = "Raven could not complete this task. The operator can find the details in its log."
STOPPED_MESSAGE = "Raven stopped before this task finished; send it again."
BUSY_MESSAGE = "Raven was too busy to start this task in time; send it again."
NO_ANSWER = "(no answer: the question timed out)"
ANSWERED_ELSEWHERE = "(answered by a person at Raven)"


class TaskRunner:
    def __init__(
        self,
        runtime: Runtime,
        settings: A2AServerConfig,
        conversations: Conversations,
        local: LocalAsker | None,
        settle: Callable[[LiveTask], Awaitable[None]],
    ) -> None:
        """`settle` is called once a task's runner is done with it."""
        self._runtime = runtime
        self._settings = settings
        self._conversations = conversations
        self._local = local
        self._settle = settle
        self.admission = Admission(settings)
        self.closing = False
        """The server stops: a turn that stops now fails its task (one waiting for input
        stays waiting, to be resumed)."""

    async def run(
        self, task: LiveTask, message: Message, data: list[Any] | None, first: bool
    ) -> None:
        admitted: Admitted | None = None
        session_id: str | None = None
        try:
            conversation = self._conversations.session_id(task.owner, task.context_id)
            refusal = self.admission.refusal(conversation)
            if refusal is not None:
                await task.update(TaskState.TASK_STATE_REJECTED, refusal)
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._settings.input_timeout_s
            try:
                async with asyncio.timeout_at(deadline):
                    admitted = await self.admission.enter(conversation, task.cancelled)
            except TimeoutError:
                log.warning("A2A task %s: no turn slot came in time", task.id)
                await task.update(TaskState.TASK_STATE_FAILED, BUSY_MESSAGE)
                return
            if admitted is None:
                return  # cancelled while it waited: the cancel wrote CANCELED
            # Opened once admitted: a new conversation's session is stored claimed for the
            # turn that starts now (a shared store).
            session = await self._conversations.open(task.owner, task.context_id, first)
            session_id = session.id
            prompt = await self._conversations.prompt(message, task.context_id, data)
            turn = TaskTurn(session, self._local(session.id) if self._local else None)
            wait_s = max(0.0, deadline - loop.time())  # for another replica's turn to end
            turn.start(prompt, self._settings.approvals, wait_s)
            task.turn = turn
            await self._publish(task, turn)
        except Exception:
            log.exception("A2A task %s: its turn failed", task.id)
            await task.update(TaskState.TASK_STATE_FAILED, FAILED_MESSAGE)
        finally:
            if admitted is not None:
                admitted.leave()
            if session_id is not None:
                self._runtime.release(session_id)
            await self._settle(task)

    async def _publish(self, task: LiveTask, turn: TaskTurn) -> None:
        """Write what the turn says to the task, until it ends."""
        while True:
            step = await turn.next()
            if task.cancelled.is_set() and not isinstance(step, Ended):
                continue  # a stopped turn's last words (its cancelled tool call) are not told
            if isinstance(step, Started):
                await task.update(TaskState.TASK_STATE_WORKING)
            elif isinstance(step, Chunk):
                await task.answer_chunk(step.text, last=False)
            elif isinstance(step, Progress):
                working = TaskState.TASK_STATE_WORKING
                await task.update(working, step.text, metadata=PROGRESS_METADATA)
            elif isinstance(step, Asked):
                asking = {"requestId": step.request_id, "approval": step.approval}
                required = TaskState.TASK_STATE_INPUT_REQUIRED
                await task.update(required, step.text, metadata={"raven": {"asking": asking}})
                if not await turn.wait_answer(self._settings.input_timeout_s):
                    log.info("A2A task %s: the question timed out unanswered", task.id)
                    if turn.answer(None):
                        await task.update(TaskState.TASK_STATE_WORKING, NO_ANSWER)
                elif turn.answered_elsewhere:
                    turn.answered_elsewhere = False
                    if not await task.peer_replied():  # through another replica
                        await task.update(TaskState.TASK_STATE_WORKING, ANSWERED_ELSEWHERE)
            else:
                await self._end(task, step)
                return

    async def _end(self, task: LiveTask, end: Ended) -> None:
        if task.cancelled.is_set() and not self.closing:
            return  # the cancel writes CANCELED
        if end.stop == "cancelled" or self.closing:
            current = await task.cached()
            if not (self.closing and current.status.state in SETTLED):
                await task.update(TaskState.TASK_STATE_FAILED, STOPPED_MESSAGE)
            return
        if end.error:
            log.warning("A2A task %s failed: %s", task.id, end.error)
            await task.update(TaskState.TASK_STATE_FAILED, FAILED_MESSAGE)
            return
        reply = end.text or "(no answer)"
        artifacts = [task.chunk(reply[task.streamed :], last=True)]  # one write with the end
        artifacts += [task.artifact(p, str(uuid.uuid4()), p.filename) for p in end.attachments]
        usage = {"raven": {"usage": end.usage}} if end.usage else None
        await task.update(TaskState.TASK_STATE_COMPLETED, reply, usage, ahead=artifacts)

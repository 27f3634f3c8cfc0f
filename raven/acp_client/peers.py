"""The broker's host in the process that runs the sub-agents: tokens, wakes, and what
people see of the tasks the children give each other.

Each child that may address another gets the broker's `a2a` tool: an MCP server in its
sessions' `mcpServers`, with its own token in that server's environment (a child Raven
takes the same entry as its native tool). A task given to a child wakes it: Raven
prompts it with the task, inside the parent turn that runs the delegation, so its
updates and permission requests are that turn's; its reply ends the task unless it
ended or asked back itself. A worker's reply wakes a requester that is not waiting on
it. Every change is a progress line of the parent's call. Cancelling the parent's turn
cancels every task its children gave; releasing its session also ends their tokens.
Nothing here runs before a child that may use the broker starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from raven.broker.broker import Broker
from raven.broker.channel import Channel
from raven.broker.entry import server_entry
from raven.broker.task import BrokerTask
from raven.config import AgentSpec, BrokerConfig
from raven.tools import ChildToolCall, Progress, ToolContext, ToolError

if TYPE_CHECKING:
    from raven.acp_client.agent import Outcome
    from raven.engine import TaskRows  # `Runtime.tasks`

log = logging.getLogger(__name__)

Delegate = Callable[[ToolContext, str, str], Awaitable["Outcome"]]


class Peers:
    def __init__(
        self,
        rows: TaskRows,
        agents: Sequence[AgentSpec],
        config: BrokerConfig,
        delegate: Delegate,
        busy: Callable[[str, str], bool],
    ) -> None:
        self.broker = Broker(rows, agents, config, self)
        self._channel = Channel(self.broker)
        self._delegate = delegate
        self._busy = busy
        self._tokens: dict[tuple[str, str], str] = {}
        self._attending: dict[str, list[ToolContext]] = {}
        """Each parent session's delegate calls running now, newest last."""
        self._runs: dict[str, asyncio.Task[None]] = {}
        """The worker turns running, by task."""
        self._telling: set[asyncio.Task[None]] = set()
        """The turns telling requesters what became of their tasks."""

    async def servers(self, session_id: str, agent: str) -> list[dict[str, Any]]:
        """The `mcpServers` entries for `agent`'s child under the parent `session_id`."""
        if not self.broker.peers(agent):
            return []
        key = (session_id, agent)
        if key not in self._tokens:
            self._tokens[key] = self.broker.mint(session_id, agent)
        return [server_entry(await self._channel.open(), self._tokens[key])]

    @contextlib.contextmanager
    def attending(self, ctx: ToolContext) -> Iterator[None]:
        """While a delegate call of the parent runs: its children's tasks show in it, and
        are woken inside its turn."""
        calls = self._attending.setdefault(ctx.session_id, [])
        calls.append(ctx)
        try:
            yield
        finally:
            calls.remove(ctx)
            if not calls:
                del self._attending[ctx.session_id]

    async def cancelled(self, session_id: str) -> None:
        """The parent's turn was cancelled: its children's tasks are canceled and their
        turns on them stopped."""
        await self._stop_runs(session_id)
        await self.broker.cancel_context(session_id)

    async def end(self, session_id: str) -> None:
        """The parent session was released: as `cancelled`, and its children's tokens are
        no longer good (the children are stopped)."""
        await self._stop_runs(session_id)
        self._tokens = {k: t for k, t in self._tokens.items() if k[0] != session_id}
        await self.broker.end_context(session_id)

    async def _stop_runs(self, session_id: str) -> None:
        runs = [t for t in (*self._runs.values(), *self._telling) if t.get_name() == session_id]
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)

    async def aclose(self) -> None:
        runs = [*self._runs.values(), *self._telling]
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        await self._channel.aclose()

    # The broker's host.

    def runs(self, task_id: str) -> bool:
        return task_id in self._runs

    def changed(self, task: BrokerTask, wake: str | None) -> None:
        calls = self._attending.get(task.context_id)
        ctx = calls[-1] if calls else None
        if ctx is not None:
            ctx.progress(Progress(text=_line(task), detail=_as_call(task)))
        if wake is None:
            return
        if wake == task.worker:
            if task.state == "canceled" and (run := self._runs.get(task.id)) is not None:
                run.cancel()
            elif task.state in ("submitted", "working") and task.id not in self._runs:
                if ctx is None:
                    log.info("broker task %s waits for a turn of its session", task.id)
                    return
                self._runs[task.id] = self._start(task, self._work(task, ctx))
        elif ctx is not None and not self._busy(task.context_id, wake):
            self._telling.add(self._start(task, self._tell(task, ctx)))

    def _start(self, task: BrokerTask, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Named by the parent session, which `end` stops."""
        return asyncio.create_task(work, name=task.context_id)

    async def _work(self, task: BrokerTask, ctx: ToolContext) -> None:
        """The worker's turns on `task`: its reply is the answer unless it ended or asked;
        a follow-up that came during a turn, unseen, is the next turn's prompt."""
        try:
            await self._turns_on(task, ctx)
        finally:
            # At once, with no wait after the last turn's end was decided: a follow-up
            # from now on finds no run, and starts one.
            if self._runs.get(task.id) is asyncio.current_task():
                del self._runs[task.id]

    async def _turns_on(self, task: BrokerTask, ctx: ToolContext) -> None:
        next_turn: BrokerTask | None = await self.broker.started(task.id)
        while next_turn is not None:
            task = next_turn
            said = "\n\n".join(m.text for m in self.broker.unseen(task, task.worker))
            how = "gives you task" if len(task.messages) == 1 else "answers you on task"
            prompt = (
                f"{task.requester} {how} {task.id}:\n\n{said}\n\n"
                f"Your reply is the task's answer, sent back to {task.requester}. To ask "
                f"{task.requester} something first, use the a2a tool: send with task_id "
                f"{task.id}."
            )
            self.broker.shown(task, task.worker)
            with self.broker.working_on(task):
                try:
                    outcome = await self._delegate(ctx, task.worker, prompt)
                except ToolError as exc:
                    await self.broker.finished(task.id, "", failure=str(exc))
                    return
                except Exception:
                    log.exception("broker task %s: its worker's turn failed", task.id)
                    await self.broker.finished(task.id, "", failure="its worker's turn failed")
                    return
            next_turn = await self.broker.finished(task.id, outcome.answer)

    async def _tell(self, task: BrokerTask, ctx: ToolContext) -> None:
        """Tell a requester that waits on nothing what became of its task."""
        said = task.messages[-1].text if task.messages else ""
        prompt = (
            f"Task {task.id}, which you gave {task.worker}, is now {task.state}. "
            f"{task.worker} says:\n\n{said}"
        )
        try:
            await self._delegate(ctx, task.requester, prompt)
        except ToolError as exc:
            log.info("broker task %s: %s could not be told: %s", task.id, task.requester, exc)
        except Exception:
            log.exception("broker task %s: telling %s failed", task.id, task.requester)
        finally:
            self._telling.discard(asyncio.current_task())  # type: ignore[arg-type]


_STATUS = {"submitted": "pending", "completed": "completed"}
"""A task's state as a tool call's status (ACP's): a task that will not complete failed."""


def _as_call(task: BrokerTask) -> ChildToolCall:
    """The task as a call of its requester's, so every face shows it among that child's
    work: a row under the delegate call, updated as the task moves."""
    asked = task.messages[0].text.splitlines()[0][:60] if task.messages else ""
    status = _STATUS.get(task.state, "failed" if task.ended else "in_progress")
    title = f"a2a → {task.worker}: {asked}"
    if task.state not in ("submitted", "working", "completed"):
        title += f" ({task.state})"
    return ChildToolCall(task.requester, task.id, title, status, "other")


def _line(task: BrokerTask) -> str:
    said = task.messages[-1].text.splitlines()[0][:80] if task.messages else ""
    return f"a2a {task.requester} → {task.worker} ({task.id}): {task.state}: {said}"

"""The local A2A broker: sub-agents of one parent session ask each other for work.

Each sub-agent is known by a capability token the host mints for it (`mint`) and hands
to the process that speaks for it, never to its model: the token says which agent
speaks and in which parent session (the task's context). Tasks are durable rows of the
one task store (`raven.sessions.tasks`, owner `broker`), so a delegate re-reads a task
after the parent process restarts. What a request changes is routed to the task's
counterpart through the host (`Host.changed`): a send wakes the worker, a reply wakes
the requester.

Bounds: `MAX_TEXT_CHARS` a message, `MAX_HISTORY` messages a task, `MAX_TASKS_PER_CONTEXT`
tasks a context, `maxSends` sends a context in one run of the host, and a chain of tasks
sent while working on another at most `maxDepth` long. A send repeated (same sender,
addressee and text) within `dedupS` is the task already sent. Never starts a process and
never speaks a wire format: that is the host's and the channel's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from raven.broker.task import (
    ASKING,
    MAX_TASKS_PER_CONTEXT,
    MAX_TEXT_CHARS,
    MAX_WAIT_S,
    TERMINAL,
    WAIT_S,
    BrokerError,
    BrokerTask,
    Role,
    Said,
    State,
    now_us,
)
from raven.config import AgentSpec, BrokerConfig
from raven.sessions.tasks import TaskFilter, TaskRow, TaskRows

OWNER = "broker"
"""The owner of every broker task in the store (A2A's owners are its callers' names)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What a token stands for."""

    context_id: str
    agent: str


class Host(Protocol):
    """Who runs the agents: told of each change, it wakes the agent named."""

    def changed(self, task: BrokerTask, wake: str | None) -> None:
        """`task` changed; `wake` (an agent) is the counterpart to tell, None if it waits
        on the task already or needs nothing."""
        ...

    def runs(self, task_id: str) -> bool:
        """Whether the task's worker works on it now in this process."""
        ...


class Broker:
    def __init__(
        self,
        rows: TaskRows,
        agents: Sequence[AgentSpec],
        config: BrokerConfig,
        host: Host,
    ) -> None:
        self._rows = rows
        self._agents: Mapping[str, AgentSpec] = {a.name: a for a in agents}
        self._config = config
        self._host = host
        self._grants: dict[bytes, Grant] = {}
        """By the token's digest: looking one up compares no secret byte by byte."""
        self._tasks: dict[str, tuple[BrokerTask, int]] = {}
        """The tasks read or written in this run, with their stored version."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._changes: dict[str, asyncio.Event] = {}
        self._waiting: Counter[tuple[str, str]] = Counter()
        """(task, agent) pairs of the agents waiting on a task now."""
        self._sends: Counter[str] = Counter()
        self._working: dict[tuple[str, str], list[int]] = {}
        """(context, agent) → the depths of the tasks it works on now (`working_on`)."""
        self._seen: dict[tuple[str, str], int] = {}
        """(task, agent) → how many of the task's messages the agent has seen (`shown`)."""

    # The host's side.

    def mint(self, context_id: str, agent: str) -> str:
        token = secrets.token_urlsafe(32)
        self._grants[_digest(token)] = Grant(context_id, agent)
        return token

    def peers(self, agent: str) -> list[AgentSpec]:
        """The agents `agent` may address: its `peers`, else every other one."""
        spec = self._agents.get(agent)
        allowed = None if spec is None else spec.peers
        return [
            a
            for name, a in self._agents.items()
            if name != agent and (allowed is None or name in allowed)
        ]

    @contextmanager
    def working_on(self, task: BrokerTask) -> Iterator[None]:
        """While the host runs `task`'s worker on it: what it sends is one step deeper."""
        depths = self._working.setdefault((task.context_id, task.worker), [])
        depths.append(task.depth)
        try:
            yield
        finally:
            depths.remove(task.depth)

    async def started(self, task_id: str) -> BrokerTask:
        """The host woke the worker: a submitted task is working."""
        async with self._lock(task_id):
            task = await self._load(task_id)
            if task.state == "submitted":
                task.move("worker", "working")
                await self._save(task, None)
            return task

    def shown(self, task: BrokerTask, agent: str) -> None:
        """`agent` has seen every message of `task` so far (it was prompted with it, or a
        call of its returned it)."""
        self._seen[(task.id, agent)] = len(task.messages)

    def unseen(self, task: BrokerTask, agent: str) -> list[Said]:
        """The counterpart's messages on `task` that `agent` has not seen."""
        seen = self._seen.get((task.id, agent), 0)
        return [m for m in task.messages[seen:] if m.by != agent]

    async def finished(
        self, task_id: str, answer: str, failure: str | None = None
    ) -> BrokerTask | None:
        """The worker's turn on the task ended: a task it left working ends with its
        answer (or `failure`); one it left asking, or ended itself, stays as it is. A
        follow-up of the requester's that came during the turn and the worker never saw
        is not answered by it: the task is returned, for another turn on it."""
        async with self._lock(task_id):
            task = await self._load(task_id)
            if task.state not in ("submitted", "working"):
                return None
            if failure is None and self.unseen(task, task.worker):
                return task
            with contextlib.suppress(BrokerError):  # a full history: the state still moves
                task.add(task.worker, (failure or answer.strip() or "(no answer)")[:MAX_TEXT_CHARS])
            task.move("worker", "failed" if failure is not None else "completed")
            await self._save(task, task.requester)
            return None

    async def cancel_context(self, context_id: str) -> None:
        """The parent's turn was cancelled: every task of its children that has not ended is
        canceled (their tokens stay good: the children serve the session's next turn)."""
        for stored in await tasks_of(self._rows, context_id):
            if stored.ended:
                continue
            async with self._lock(stored.id):
                task = await self._load(stored.id)
                if not task.ended:
                    task.move("requester", "canceled")
                    await self._save(task, task.worker)

    async def end_context(self, context_id: str) -> None:
        """The parent session was let go: its children's tasks are canceled, their tokens
        are no longer good, and nothing of it is kept here."""
        self._grants = {k: g for k, g in self._grants.items() if g.context_id != context_id}
        await self.cancel_context(context_id)
        for task_id in [t for t, (task, _) in self._tasks.items() if task.context_id == context_id]:
            del self._tasks[task_id]
            self._locks.pop(task_id, None)
            self._changes.pop(task_id, None)
        self._seen = {k: n for k, n in self._seen.items() if k[0] in self._tasks}
        self._sends.pop(context_id, None)

    # The agents' side: `call` is the one entry.

    async def call(self, token: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        grant = self._grants.get(_digest(token)) if token else None
        if grant is None:
            raise BrokerError("unknown_token", "the broker does not know this token")
        if action == "discover":
            return self.discover(grant)
        if action == "send":
            return await self.send(
                grant,
                _text(args),
                to=_opt_str(args, "to"),
                task_id=_opt_str(args, "task_id"),
                needs=_opt_str(args, "needs"),
                timeout_s=_timeout(args),
            )
        task_id = _opt_str(args, "task_id")
        if task_id is None:
            raise BrokerError("invalid_request", f"{action} needs a task_id")
        if action == "get":
            return await self.get(grant, task_id)
        if action == "wait":
            return await self.wait(grant, task_id, _timeout(args))
        if action == "complete":
            return await self.complete(
                grant, task_id, _text(args, required=False), _opt_str(args, "outcome")
            )
        if action == "cancel":
            return await self.cancel(grant, task_id)
        raise BrokerError(
            "invalid_request",
            f"no action {action!r}: discover, send, get, wait, complete or cancel",
        )

    def discover(self, grant: Grant) -> dict[str, Any]:
        peers = self.peers(grant.agent)
        if not peers:
            raise BrokerError("no_peers", f"{grant.agent} may address no other agent")
        return {
            "agents": [{"name": a.name, "description": a.description} for a in peers],
        }

    async def send(
        self,
        grant: Grant,
        text: str,
        to: str | None = None,
        task_id: str | None = None,
        needs: str | None = None,
        timeout_s: float = WAIT_S,
    ) -> dict[str, Any]:
        """A new task for `to`, or a message on the task `task_id` (the requester's follow-up,
        or the worker asking the requester: `needs` "input" or "auth"); then waits up to
        `timeout_s` for the counterpart."""
        if (to is None) == (task_id is None):
            raise BrokerError("invalid_request", "send needs either `to` (a new task) or `task_id`")
        if self._sends[grant.context_id] >= self._config.max_sends:
            raise BrokerError(
                "send_cap",
                f"the sub-agents of this session have sent {self._config.max_sends} "
                "messages in this run, the most they may",
            )
        if to is not None:
            task = await self._new(grant, to, text)
        else:
            assert task_id is not None
            task = await self._message(grant, task_id, text, needs)
        return await self._wait(grant, task, timeout_s)

    async def get(self, grant: Grant, task_id: str) -> dict[str, Any]:
        task, role = await self._party(grant, task_id)
        self._rewake(task, role)
        self.shown(task, grant.agent)
        return task.view()

    async def wait(self, grant: Grant, task_id: str, timeout_s: float) -> dict[str, Any]:
        task, role = await self._party(grant, task_id)
        self._rewake(task, role)
        return await self._wait(grant, task, timeout_s)

    async def complete(
        self, grant: Grant, task_id: str, text: str, outcome: str | None
    ) -> dict[str, Any]:
        end = outcome or "completed"
        if end not in ("completed", "failed", "rejected"):
            raise BrokerError("invalid_request", "outcome is completed, failed or rejected")
        async with self._lock(task_id):
            task, role = await self._party(grant, task_id)
            if role != "worker":
                raise BrokerError(
                    "invalid_transition", f"only {task.worker}, its worker, ends task {task_id}"
                )
            _end_or_refuse(task)
            if text:
                task.add(grant.agent, text)
            task.move("worker", end)  # type: ignore[arg-type]
            await self._save(task, task.requester)
        return task.view()

    async def cancel(self, grant: Grant, task_id: str) -> dict[str, Any]:
        async with self._lock(task_id):
            task, role = await self._party(grant, task_id)
            if role != "requester":
                raise BrokerError(
                    "invalid_transition",
                    f"only {task.requester}, who asked, cancels task {task_id}; its worker "
                    "ends it with complete (outcome failed or rejected)",
                )
            task.move("requester", "canceled")
            await self._save(task, task.worker)
        return task.view()

    # Inside.

    async def _new(self, grant: Grant, to: str, text: str) -> BrokerTask:
        if to not in self._agents or not self._agents[to].enabled:
            raise BrokerError("unknown_agent", f"no agent {to!r}; discover lists those you may ask")
        if to not in {a.name for a in self.peers(grant.agent)}:
            raise BrokerError("not_allowed", f"{grant.agent} may not address {to}")
        depth = max(self._working.get((grant.context_id, grant.agent)) or [0]) + 1
        if depth > self._config.max_depth:
            raise BrokerError(
                "chain_budget",
                f"this would be a chain of {depth} tasks, each sent while working on the one "
                f"before; the most is {self._config.max_depth}. Answer the task you work on "
                "yourself.",
            )
        key = hashlib.sha256(f"{grant.agent}\0{to}\0{text}".encode()).hexdigest()
        page = await self._rows.task_page(
            TaskFilter(OWNER, grant.context_id), MAX_TASKS_PER_CONTEXT
        )
        since_us = now_us() - int(self._config.dedup_s * 1_000_000)
        for row in page.rows:
            if row.updated_us < since_us:
                break  # newest first: the rest are older still
            earlier = BrokerTask.decode(row.body)
            if earlier.key == key and earlier.created_us >= since_us:
                async with self._lock(earlier.id):
                    earlier = await self._load(earlier.id)
                self._rewake(earlier, "requester")
                return earlier
        if page.total >= MAX_TASKS_PER_CONTEXT:
            raise BrokerError(
                "send_cap", f"this session's sub-agents hold {MAX_TASKS_PER_CONTEXT} tasks already"
            )
        now = now_us()
        task = BrokerTask(
            id=f"bt_{secrets.token_hex(8)}",
            context_id=grant.context_id,
            requester=grant.agent,
            worker=to,
            state="submitted",
            depth=depth,
            created_us=now,
            updated_us=now,
            key=key,
        )
        task.add(grant.agent, text)
        self._sends[grant.context_id] += 1
        async with self._lock(task.id):
            await self._save(task, to, version=0)
        return task

    async def _message(
        self, grant: Grant, task_id: str, text: str, needs: str | None
    ) -> BrokerTask:
        async with self._lock(task_id):
            task, role = await self._party(grant, task_id)
            _end_or_refuse(task)
            to: State
            if role == "requester":
                to = "submitted" if task.state == "submitted" else "working"
            elif needs in (None, "input"):
                to = "input-required"
            elif needs == "auth":
                to = "auth-required"
            else:
                raise BrokerError("invalid_request", "needs is input or auth")
            task.move(role, to)
            task.add(grant.agent, text)
            self._sends[grant.context_id] += 1
            await self._save(task, task.counterpart(role))
        return task

    async def _party(self, grant: Grant, task_id: str) -> tuple[BrokerTask, Role]:
        task = await self._load(task_id)
        if task.context_id != grant.context_id:
            raise BrokerError(
                "cross_context_denied", f"task {task_id} belongs to another session's agents"
            )
        role = task.role_of(grant.agent)
        if role is None:
            raise BrokerError(
                "not_allowed", f"{grant.agent} is neither the requester nor the worker of {task_id}"
            )
        return task, role

    def _rewake(self, task: BrokerTask, role: Role) -> None:
        """A task its worker should be on but is not (the host restarted meanwhile) is
        handed to it again when its requester looks at it."""
        if role == "requester" and task.state in ("submitted", "working"):
            if not self._host.runs(task.id):
                self._host.changed(task, task.worker)

    async def _wait(self, grant: Grant, task: BrokerTask, timeout_s: float) -> dict[str, Any]:
        """`task`'s view once it needs `grant`'s agent (ended or asking, for its requester;
        a follow-up or a cancel, for its worker), or after `timeout_s` as it is then."""
        role = task.role_of(grant.agent)
        seen = len(task.messages)
        deadline = time.monotonic() + timeout_s
        pair = (task.id, grant.agent)
        self._waiting[pair] += 1
        try:
            while True:
                task = await self._load(task.id)
                if _needs(task, role, seen):
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                changed = self._changes.setdefault(task.id, asyncio.Event())
                try:
                    async with asyncio.timeout(left):
                        await changed.wait()
                except TimeoutError:
                    pass
        finally:
            self._waiting[pair] -= 1
            if not self._waiting[pair]:
                del self._waiting[pair]
        self.shown(task, grant.agent)
        return task.view()

    async def _load(self, task_id: str) -> BrokerTask:
        if (kept := self._tasks.get(task_id)) is not None:
            return kept[0]
        found = await self._rows.task_get(task_id, OWNER)
        if found is None:
            raise BrokerError("unknown_task", f"no task {task_id}")
        row, version = found
        task = BrokerTask.decode(row.body)
        self._tasks[task_id] = (task, version)
        return task

    async def _save(self, task: BrokerTask, wake: str | None, version: int | None = None) -> None:
        if version is None:
            version = self._tasks[task.id][1]
        row = TaskRow(task.id, OWNER, task.context_id, task.state, task.updated_us, task.encode())
        saved = await self._rows.task_save(row, version, final=task.ended)
        self._tasks[task.id] = (task, saved.version)
        if (changed := self._changes.pop(task.id, None)) is not None:
            changed.set()
        if wake is not None and self._waiting[(task.id, wake)]:
            wake = None  # it is told by its wait
        self._host.changed(task, wake)

    def _lock(self, task_id: str) -> asyncio.Lock:
        return self._locks.setdefault(task_id, asyncio.Lock())


async def tasks_of(rows: TaskRows, context_id: str) -> list[BrokerTask]:
    """The tasks the sub-agents of the session `context_id` gave each other, newest first."""
    page = await rows.task_page(TaskFilter(OWNER, context_id), MAX_TASKS_PER_CONTEXT)
    return [BrokerTask.decode(row.body) for row in page.rows]


def _needs(task: BrokerTask, role: Role | None, seen: int) -> bool:
    if role == "requester":
        return task.state in TERMINAL or task.state in ASKING
    if task.state in TERMINAL:
        return True
    news = task.messages[seen:]
    return any(m.by == task.requester for m in news)


def _end_or_refuse(task: BrokerTask) -> None:
    if task.ended:
        raise BrokerError("task_terminal", f"task {task.id} is {task.state}; it never changes")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _opt_str(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BrokerError("invalid_request", f"{name} is a string")
    return value


def _text(args: Mapping[str, Any], required: bool = True) -> str:
    text = _opt_str(args, "text") or ""
    if required and not text.strip():
        raise BrokerError("invalid_request", "text is required")
    if len(text) > MAX_TEXT_CHARS:
        raise BrokerError(
            "payload_too_large",
            f"a message holds at most {MAX_TEXT_CHARS:,} characters; this one has {len(text):,}",
        )
    return text


def _timeout(args: Mapping[str, Any]) -> float:
    value = args.get("timeout_s", WAIT_S)
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise BrokerError("invalid_request", "timeout_s is a number of seconds")
    return min(float(value), MAX_WAIT_S)

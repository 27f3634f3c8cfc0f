"""The `delegate` tool and the tool source that keeps one sub-agent per agent per session.

Offered when agents are configured and enabled, never inside a sub-agent. A child
is reused across `delegate` calls of its parent session and stopped when that
session is released or the process shuts down. A task given while the child works on
another runs beside it in a fork of the child's session when the child serves
`session/fork`, and waits its turn when it does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from raven.acp_client.agent import Outcome, SubAgent, SubAgentError
from raven.acp_client.cli_backend import run_cli
from raven.acp_client.worktree import WorktreeError, close_worktree, open_worktree, summary
from raven.config import AgentSpec, BrokerConfig, SandboxLevel
from raven.sandbox import Sandbox, strictest
from raven.tools import Tool, ToolContext, ToolError, ToolKind, ToolOutput
from raven.tools.base import Args, BuiltinTool

if TYPE_CHECKING:
    from raven.acp_client.peers import Peers
    from raven.engine import TaskRows


class DelegateArgs(Args):
    agent: str = Field(description="Name of the sub-agent to hand the task to")
    task: str = Field(min_length=1, description="The task, stated fully: the agent sees no history")


class DelegateTool(BuiltinTool):
    name: ClassVar[str] = "delegate"
    kind: ClassVar[ToolKind] = "other"
    args_model = DelegateArgs

    def __init__(self, source: AgentsSource) -> None:
        self._source = source
        roster = "; ".join(_described(a) for a in source.agents)
        self.description = (  # type: ignore[misc]
            "Hand a task to a local sub-agent and return its answer. It works in the same "
            f"directory, without your conversation. Agents: {roster}"
        )

    def title(self, args: DelegateArgs, ctx: ToolContext) -> str:
        return f"Delegate to {args.agent}: {args.task[:60]}"

    async def run(self, args: DelegateArgs, ctx: ToolContext) -> ToolOutput:
        outcome = await self._source.attended(ctx, args.agent, args.task)
        lines = [outcome.answer or "(the sub-agent gave no answer)"]
        lines.append(f"[{args.agent} stopped: {outcome.stop_reason}]")
        if outcome.decisions:
            lines.append("[permission decisions: " + "; ".join(outcome.decisions) + "]")
        if outcome.changes:
            lines.append(outcome.changes)
        if (spent := outcome.usage) is not None:
            lines.append(
                f"[{args.agent} used {spent.input_tokens:,} input and "
                f"{spent.output_tokens:,} output tokens]"
            )
        refused = outcome.stop_reason == "refusal"
        return ToolOutput("\n\n".join(lines), is_error=refused, usage=outcome.usage)


def _described(agent: AgentSpec) -> str:
    said = f"{agent.name}: {agent.description}" if agent.description else agent.name
    if agent.isolation == "worktree":
        said += " (works in a git worktree of its own: its changes come back on a branch "
        said += "for the person to review, not in the working directory)"
    return said


class AgentsSource:
    """Offers `delegate`; owns the sub-agent processes, one per (session, agent).

    With `keep`, at most that many children stay running: starting another first stops
    the one used least recently that works on nothing, whose session the next child of
    that (session, agent) resumes when it can."""

    MAX_REMEMBERED = 4096

    def __init__(self, agents: Sequence[AgentSpec], keep: int | None = None) -> None:
        # An A2A agent over stdio is asked with a2a_send, not delegated to.
        self.agents = [a for a in agents if a.enabled and not a.over_a2a]
        self._tools: list[Tool] = [DelegateTool(self)] if self.agents else []
        self._keep = keep
        self._children: dict[tuple[str, str], SubAgent] = {}
        """In the order they were last used, least recent first."""
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._resume: dict[tuple[str, str], str] = {}
        """The child's session of each (session, agent), for its next child to resume."""
        self._peers: Peers | None = None
        """The broker's host, once `bind` gave it a store (and two agents may talk)."""

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    def bind(self, rows: TaskRows, config: BrokerConfig) -> None:
        """Let the children ask each other through a broker whose tasks are `rows`."""
        if config.enabled and len(self.agents) > 1:
            from raven.acp_client.peers import Peers

            self._peers = Peers(rows, self.agents, config, self.delegate, self._busy)

    def _busy(self, session_id: str, agent: str) -> bool:
        lock = self._locks.get((session_id, agent))
        return lock is not None and lock.locked()

    async def attended(self, ctx: ToolContext, name: str, task: str) -> Outcome:
        """`delegate` as the parent's model asks it: the tasks its children give each other
        meanwhile show in this call and are cancelled with it."""
        if self._peers is None:
            return await self.delegate(ctx, name, task)
        with self._peers.attending(ctx):
            try:
                return await self.delegate(ctx, name, task)
            except asyncio.CancelledError:
                await asyncio.shield(self._peers.cancelled(ctx.session_id))
                raise

    async def _servers(self, session_id: str, agent: str) -> list[dict[str, Any]]:
        if self._peers is None:
            return []
        return await self._peers.servers(session_id, agent)

    async def delegate(
        self,
        ctx: ToolContext,
        name: str,
        task: str,
        speak: Callable[[str], None] | None = None,
    ) -> Outcome:
        """Run `task` on the agent `name` for the session `ctx.session_id`; its own text
        goes to `speak` as it comes, when given (see `SubAgent.prompt`)."""
        spec = next((a for a in self.agents if a.name == name), None)
        if spec is None:
            known = ", ".join(a.name for a in self.agents)
            raise ToolError(f"no sub-agent {name!r}; agents: {known}")
        cwd = ctx.resolve(spec.cwd) if spec.cwd else ctx.cwd
        # A session that requires a sandbox has it held around the agent by Raven (its
        # entry's `sandbox`, at least as strict), or asks the agent for it.
        required = ctx.sandbox.demanded
        jail = ctx.sandbox.required_at(strictest(spec.sandbox, required) if spec.sandbox else None)
        asks = required if jail is None else None
        if asks is not None and spec.protocol == "cli":
            raise ToolError(_unjailed(spec, asks))
        try:
            if spec.isolation == "worktree":
                return await self._isolated(ctx, spec, task, cwd, jail, asks, speak)
            if spec.protocol == "cli":
                return await run_cli(spec, task, cwd, jail)
            key = (ctx.session_id, name)
            busy = self._locks.setdefault(key, asyncio.Lock())
            child = self._children.get(key)
            if busy.locked() and child is not None and child.is_alive and child.forks:
                return await self._beside(ctx, child, task, asks, speak)
            async with busy:
                child = self._children.pop(key, None)
                if child is None or not child.is_alive:
                    await self._make_room()
                    servers = await self._servers(ctx.session_id, name)
                    child = SubAgent(spec, cwd, jail, servers)
                    await child.start(self._resume.get(key))
                    self._remember(key, child.session_id)
                self._children[key] = child  # the most recently used, from now on
                await _ask_sandbox(child, asks)
                ctx.parts.cancel = child.cancel_subagent
                return await child.prompt(task, ctx.progress, ctx.approve, ctx.ask, speak=speak)
        except (SubAgentError, WorktreeError) as exc:
            raise ToolError(str(exc)) from None

    async def _make_room(self) -> None:
        """Under `keep`, stop the least recently used children that work on nothing until
        one more may start (those that work are never stopped for it)."""
        if self._keep is None:
            return
        idle = [k for k in self._children if not self._locks[k].locked()]
        excess = len(self._children) + 1 - self._keep
        stopped = [self._children.pop(k) for k in idle[: max(0, excess)]]
        await asyncio.gather(*(c.stop() for c in stopped))

    def _remember(self, key: tuple[str, str], session_id: str) -> None:
        self._resume.pop(key, None)
        if len(self._resume) >= self.MAX_REMEMBERED:
            self._resume.pop(next(iter(self._resume)))
        self._resume[key] = session_id

    async def _beside(
        self,
        ctx: ToolContext,
        child: SubAgent,
        task: str,
        asks: SandboxLevel | None,
        speak: Callable[[str], None] | None,
    ) -> Outcome:
        """The task in a fork of the busy child's session: warm (what the child knew before
        its current task, its process already up), run beside the task it works on."""
        forked = await child.fork()
        ctx.parts.cancel = child.cancel_subagent
        try:
            await _ask_sandbox(child, asks, forked)
            return await child.prompt(task, ctx.progress, ctx.approve, ctx.ask, forked, speak)
        finally:
            await asyncio.shield(child.close(forked))

    async def _isolated(
        self,
        ctx: ToolContext,
        spec: AgentSpec,
        task: str,
        cwd: Path,
        jail: Sandbox | None,
        asks: SandboxLevel | None,
        speak: Callable[[str], None] | None,
    ) -> Outcome:
        """The task in a worktree of its own, by a child of its own (so tasks of one agent
        run side by side); its changes stay on the worktree's branch."""
        tree = await open_worktree(cwd, spec.name, task)
        failed: SubAgentError | None = None
        outcome: Outcome | None = None
        try:
            where = tree.where(cwd)
            if spec.protocol == "cli":
                outcome = await run_cli(spec, task, where, jail)
            else:
                child = SubAgent(spec, where, jail, await self._servers(ctx.session_id, spec.name))
                ctx.parts.cancel = child.cancel_subagent
                try:
                    await child.start()
                    await _ask_sandbox(child, asks)
                    outcome = await child.prompt(
                        task, ctx.progress, ctx.approve, ctx.ask, speak=speak
                    )
                finally:
                    await child.stop()
        except SubAgentError as exc:
            failed = exc
        finally:
            message = f"{spec.name}: {task.splitlines()[0][:72] if task.strip() else 'task'}"
            changes = await asyncio.shield(close_worktree(tree, message))
        if failed is not None or outcome is None:  # what it did before failing is kept too
            raise SubAgentError(f"{failed}\n\n{summary(tree, changes)}") from None
        outcome.changes = summary(tree, changes)
        return outcome

    async def release(self, session_id: str) -> None:
        """Stop the sub-agents of one parent session."""
        for key in [k for k in self._resume if k[0] == session_id]:
            del self._resume[key]
        keys = [k for k in self._children if k[0] == session_id]
        if self._peers is not None:
            await self._peers.end(session_id)
        await asyncio.gather(*(self._children.pop(k).stop() for k in keys))

    async def aclose(self) -> None:
        if self._peers is not None:
            await self._peers.aclose()
        children, self._children = list(self._children.values()), {}
        await asyncio.gather(*(c.stop() for c in children))


async def _ask_sandbox(
    child: SubAgent, level: SandboxLevel | None, session: str | None = None
) -> None:
    """Require `level` of the child's session, which must offer the sandbox option."""
    if level is None:
        return
    if not child.offers_sandbox(session):
        raise SubAgentError(_unjailed(child.spec, level))
    await child.require_sandbox(level, session)


def _unjailed(spec: AgentSpec, level: SandboxLevel) -> str:
    return (
        f"this session requires the {level} sandbox, and {spec.name} cannot be held in it: "
        "it offers no sandbox of its own (acp.sandbox) and its entry sets no `sandbox` of "
        "Raven's around it"
    )

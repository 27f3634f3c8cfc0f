"""The `delegate` tool and the tool source that keeps one sub-agent per agent per session.

Offered when agents are configured and enabled, never inside a sub-agent. A child
is reused across `delegate` calls of its parent session and stopped when that
session is released or the process shuts down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from raven.acp_client.agent import Outcome, SubAgent, SubAgentError
from raven.acp_client.cli_backend import run_cli
from raven.config import AgentSpec
from raven.tools import Tool, ToolContext, ToolError, ToolKind, ToolOutput
from raven.tools.base import Args, BuiltinTool


class DelegateArgs(Args):
    agent: str = Field(description="Name of the sub-agent to hand the task to")
    task: str = Field(min_length=1, description="The task, stated fully: the agent sees no history")


class DelegateTool(BuiltinTool):
    name: ClassVar[str] = "delegate"
    kind: ClassVar[ToolKind] = "other"
    args_model = DelegateArgs

    def __init__(self, source: AgentsSource) -> None:
        self._source = source
        roster = "; ".join(
            f"{a.name}: {a.description}" if a.description else a.name for a in source.agents
        )
        self.description = (  # type: ignore[misc]
            "Hand a task to a local sub-agent and return its answer. It works in the same "
            f"directory, without your conversation. Agents: {roster}"
        )

    def title(self, args: DelegateArgs, ctx: ToolContext) -> str:
        return f"Delegate to {args.agent}: {args.task[:60]}"

    async def run(self, args: DelegateArgs, ctx: ToolContext) -> ToolOutput:
        outcome = await self._source.delegate(ctx, args.agent, args.task)
        lines = [outcome.answer or "(the sub-agent gave no answer)"]
        lines.append(f"[{args.agent} stopped: {outcome.stop_reason}]")
        if outcome.decisions:
            lines.append("[permission decisions: " + "; ".join(outcome.decisions) + "]")
        return ToolOutput("\n\n".join(lines), is_error=outcome.stop_reason == "refusal")


class AgentsSource:
    """Offers `delegate`; owns the sub-agent processes, one per (session, agent)."""

    def __init__(self, agents: Sequence[AgentSpec]) -> None:
        self.agents = [a for a in agents if a.enabled]
        self._tools: list[Tool] = [DelegateTool(self)] if self.agents else []
        self._children: dict[tuple[str, str], SubAgent] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    async def delegate(self, ctx: ToolContext, name: str, task: str) -> Outcome:
        spec = next((a for a in self.agents if a.name == name), None)
        if spec is None:
            known = ", ".join(a.name for a in self.agents)
            raise ToolError(f"no sub-agent {name!r}; agents: {known}")
        cwd = ctx.resolve(spec.cwd) if spec.cwd else ctx.cwd
        try:
            if spec.protocol == "cli":
                return await run_cli(spec, task, cwd)
            key = (ctx.session_id, name)
            async with self._locks.setdefault(key, asyncio.Lock()):
                child = self._children.get(key)
                if child is None or not child.is_alive:
                    child = SubAgent(spec, cwd)
                    await child.start()
                    self._children[key] = child
                return await child.prompt(task, ctx.progress, ctx.approve, ctx.ask)
        except SubAgentError as exc:
            raise ToolError(str(exc)) from None

    async def release(self, session_id: str) -> None:
        """Stop the sub-agents of one parent session."""
        keys = [k for k in self._children if k[0] == session_id]
        await asyncio.gather(*(self._children.pop(k).stop() for k in keys))

    async def aclose(self) -> None:
        children, self._children = list(self._children.values()), {}
        await asyncio.gather(*(c.stop() for c in children))

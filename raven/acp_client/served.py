"""A configured sub-agent answering turns in Raven's place: the engine's `StandIn` for
the sessions of an agent Raven serves (`raven a2a serve --agent NAME`).

Each session has one conversation with the child (its process kept warm between turns,
at most `keep` of them running, a stopped one's session resumed when the child can),
under the agent's own rules: a rule that escalates asks through the turn, as it would
for `delegate`. Never decides a permission itself; `SubAgent` and the rules do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import get_args

from raven.acp_client.agent import AgentInfo, SubAgent, SubAgentError
from raven.acp_client.tool import AgentsSource
from raven.config import AgentSpec
from raven.engine import Reply, StopReason
from raven.sandbox import Sandbox
from raven.tools import ToolContext

log = logging.getLogger(__name__)

_STOPS: dict[str, StopReason] = {s: s for s in get_args(StopReason)}


class ServedAgent:
    """One configured sub-agent (ACP, or a one-shot command) serving sessions' turns."""

    def __init__(self, spec: AgentSpec, keep: int, jail: Sandbox) -> None:
        self.name = spec.name
        self.spec = spec
        self.jail = jail
        """Raven's sandbox, with its own files: what `spec.sandbox` is required on."""
        self._agents = AgentsSource([spec], keep=keep)
        self.info: AgentInfo | None = None
        """What the child said of itself when `probe` started it (None: not yet, or it
        is a one-shot command)."""

    @property
    def title(self) -> str:
        return (self.info.title if self.info else "") or self.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def version(self) -> str:
        return self.info.version if self.info else ""

    async def probe(self, cwd: Path) -> AgentInfo | None:
        """Start the child once to learn its name and version (for its card); None when it
        is a one-shot command or would not start (logged: the card then says what the
        config says)."""
        if self.spec.protocol != "acp":
            return None
        child = SubAgent(self.spec, cwd, self.jail.required_at(self.spec.sandbox))
        try:
            self.info = await child.start()
        except SubAgentError as exc:
            log.warning("served agent %s did not start to describe itself: %s", self.name, exc)
        finally:
            await child.stop()
        return self.info

    async def answer(self, prompt: str, ctx: ToolContext, speak: Callable[[str], None]) -> Reply:
        outcome = await self._agents.delegate(ctx, self.name, prompt, speak)
        text = outcome.answer
        if outcome.changes:
            text = f"{text}\n\n{outcome.changes}" if text else outcome.changes
        stop = _STOPS.get(outcome.stop_reason, "end_turn")
        return Reply(text, stop, outcome.usage)

    async def aclose(self) -> None:
        await self._agents.aclose()

"""Assembling the A2A face: the task store, the task service and the card of each agent
served (Raven itself, configured agents in its place).

One `A2AMount` per agent serves every hosting (standalone, the gateway, stdio). Refuses
to listen inside a sub-agent process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from a2a.types import AgentCard
from a2a.utils.errors import UnsupportedOperationError

from raven.a2a.auth import OPERATOR
from raven.a2a.card import About, agent_card, extended_card, served_card
from raven.a2a.parts import input_modes
from raven.a2a.service import TaskService
from raven.a2a.store import open_store
from raven.a2a.turn import LocalAsker
from raven.config import A2AServerConfig, ConfigError, is_subagent
from raven.engine import Runtime, StandIn
from raven.errors import RavenError

log = logging.getLogger(__name__)


class SubagentRefused(RavenError):
    """A2A hosting inside a sub-agent process, which must never listen for peers."""

    def __init__(self) -> None:
        super().__init__(
            "refusing to serve A2A inside a sub-agent process (RAVEN_SUBAGENT=1): "
            "a sub-agent must not accept work from remote peers"
        )


class Served(StandIn, About, Protocol):
    """A configured agent Raven serves in its own place: it answers the turns, and says
    what it is for its card once `probe` started it."""

    async def probe(self, cwd: Path) -> object: ...

    async def aclose(self) -> None: ...


@dataclass
class A2AMount:
    """One agent served over A2A: Raven itself, or a configured agent (`agent`)."""

    settings: A2AServerConfig
    service: TaskService
    roster: list[dict[str, Any]]
    agent: Served | None = None
    sandbox: dict[str, Any] | None = None
    """What Raven's commands run in (its own card says it; a served agent's does not)."""
    grpc_target: str | None = None
    """`host:port` of the gRPC binding, while it serves."""

    @property
    def path(self) -> str:
        """Its RPC path: the configured one for Raven, one under it for a served agent."""
        if self.agent is None:
            return self.settings.path
        return self.settings.agent_path(self.agent.name)

    @property
    def owner(self) -> str:
        """Who the authenticated caller is here: its tasks and conversations are its own
        at each agent it asks."""
        return OPERATOR if self.agent is None else f"{OPERATOR}@{self.agent.name}"

    def card(self, rpc_url: str) -> AgentCard:
        modes = input_modes(self.settings)
        if self.agent is not None:
            return served_card(rpc_url, self.agent, modes, self.grpc_target)
        return agent_card(rpc_url, self.roster, modes, self.grpc_target, self.sandbox)

    def extended_card(self, rpc_url: str) -> AgentCard:
        """The card for authenticated callers: the public one plus the roster. Without a
        roster there is none, which the spec answers as an unsupported operation (the
        public card says `extendedAgentCard: false`)."""
        if not self.roster or self.agent is not None:
            raise UnsupportedOperationError(
                message="this agent has no extended agent card (its card says so)"
            )
        return extended_card(self.card(rpc_url), self.roster)

    async def start(self) -> None:
        if self.agent is not None:
            self.service.workdir.mkdir(parents=True, exist_ok=True)
            await self.agent.probe(self.service.workdir)
        await self.service.start()

    async def aclose(self) -> None:
        await self.service.aclose()
        if self.agent is not None:
            await self.agent.aclose()


def build_mounts(
    runtime: Runtime,
    settings: A2AServerConfig,
    agents: Sequence[Served] = (),
    own: bool = True,
    env: Mapping[str, str] = os.environ,
    local: LocalAsker | None = None,
    listens: bool = True,
) -> list[A2AMount]:
    """The A2A face over `runtime`: Raven itself (`own`) first, then each of `agents`;
    raises `SubagentRefused` or `ConfigError`. `local` lets people at hand (the gateway's
    UIs) answer a task's questions before the peer is asked (they watch the tasks' turns
    in the sessions' logs). Without `listens` (stdio), the peer is the process that
    started this one: no token is asked of it, and a sub-agent may serve it, since
    nothing listens."""
    if listens and is_subagent(env):
        raise SubagentRefused()
    if listens and not settings.token:
        raise ConfigError("a2a.server.token is empty; run `raven a2a enable` to mint one")
    workdir = runtime.paths.data_dir / "a2a-work"
    if settings.cwd:
        workdir = runtime.paths.config_dir / settings.cwd
    served: list[Served | None] = [None] if own else []
    served += agents
    mounts = []
    for agent in served:
        store = open_store(settings, runtime.config.sessions, runtime.tasks, runtime.shared)
        service = TaskService(runtime, settings, store, workdir, local, agent)
        sandbox = runtime.jail.stated if agent is None else None
        mounts.append(A2AMount(settings, service, runtime.config.roster(), agent, sandbox))
    return mounts

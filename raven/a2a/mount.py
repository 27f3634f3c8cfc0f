"""Assembling the A2A face: the task store, the task service and the cards.

One `A2AMount` serves both hostings (standalone and the gateway). Refuses to
exist inside a sub-agent process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types import AgentCard
from a2a.utils.errors import UnsupportedOperationError

from raven.a2a.card import agent_card, extended_card
from raven.a2a.parts import input_modes
from raven.a2a.service import TaskService
from raven.a2a.store import open_store
from raven.a2a.turn import LocalAsker
from raven.config import A2AServerConfig, ConfigError, is_subagent
from raven.engine import Runtime
from raven.errors import RavenError

log = logging.getLogger(__name__)


class SubagentRefused(RavenError):
    """A2A hosting inside a sub-agent process, which must never listen for peers."""

    def __init__(self) -> None:
        super().__init__(
            "refusing to serve A2A inside a sub-agent process (RAVEN_SUBAGENT=1): "
            "a sub-agent must not accept work from remote peers"
        )


@dataclass
class A2AMount:
    settings: A2AServerConfig
    service: TaskService
    roster: list[dict[str, Any]]
    grpc_target: str | None = None
    """`host:port` of the gRPC binding, while it serves."""

    def card(self, rpc_url: str) -> AgentCard:
        return agent_card(rpc_url, self.roster, input_modes(self.settings), self.grpc_target)

    def extended_card(self, rpc_url: str) -> AgentCard:
        """The card for authenticated callers: the public one plus the roster. Without a
        roster there is none, which the spec answers as an unsupported operation (the
        public card says `extendedAgentCard: false`)."""
        if not self.roster:
            raise UnsupportedOperationError(
                message="this agent has no extended agent card (its card says so)"
            )
        return extended_card(self.card(rpc_url), self.roster)

    async def start(self) -> None:
        await self.service.start()

    async def aclose(self) -> None:
        await self.service.aclose()


def build_mount(
    runtime: Runtime,
    settings: A2AServerConfig,
    env: Mapping[str, str] = os.environ,
    local: LocalAsker | None = None,
    listens: bool = True,
) -> A2AMount:
    """The A2A face over `runtime`; raises `SubagentRefused` or `ConfigError`. `local` lets
    people at hand (the gateway's UIs) answer a task's questions before the peer is asked
    (they watch the tasks' turns in the sessions' logs). Without `listens` (stdio), the
    peer is the process that started this one: no token is asked of it, and a sub-agent
    may serve it, since nothing listens."""
    if listens and is_subagent(env):
        raise SubagentRefused()
    if listens and not settings.token:
        raise ConfigError("a2a.server.token is empty; run `raven a2a enable` to mint one")
    workdir = runtime.paths.data_dir / "a2a-work"
    if settings.cwd:
        workdir = runtime.paths.config_dir / settings.cwd
    store = open_store(settings, runtime.config.sessions, runtime.tasks, runtime.shared)
    service = TaskService(runtime, settings, store, workdir, local)
    return A2AMount(settings, service, runtime.config.roster())

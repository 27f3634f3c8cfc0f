"""The runtime a command works with: config, paths, and the tool sources the config asks
for (MCP servers, A2A peers, sub-agents), each imported only when configured; and the
configured agents a face serves in Raven's place."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from raven.config import ConfigError, Paths, RavenConfig, is_subagent
from raven.engine import Runtime
from raven.sandbox import Sandbox

if TYPE_CHECKING:
    from raven.acp_client.served import ServedAgent


def build_runtime(
    config: RavenConfig, paths: Paths, face: str, env: Mapping[str, str] = os.environ
) -> Runtime:
    """The runtime for `face`; `mcp` and `a2a` load only when configured.

    `a2a_send` is offered when peers or A2A agents over stdio are configured, `delegate`
    when other sub-agents are; neither inside a sub-agent.
    """
    sources: list[Any] = []
    if any(s.enabled for s in config.mcp_servers):
        from raven.mcp import McpScope

        sources.append(McpScope(config.mcp_servers, paths.logs_dir, Sandbox.of(config, paths)))
    stdio_agents = [a for a in config.agents if a.enabled and a.over_a2a]
    if (config.a2a.peers or stdio_agents) and not is_subagent(env):
        from raven.a2a_client.tool import A2ASendSource

        sources.append(A2ASendSource(config.a2a, stdio_agents))
    delegates = any(a.enabled and not a.over_a2a for a in config.agents)
    agents = None
    if delegates and not is_subagent(env):
        from raven.acp_client import AgentsSource

        agents = AgentsSource(config.agents)
        sources.append(agents)
    runtime = Runtime(config, paths, face=face, tool_sources=sources)
    if agents is not None:
        agents.bind(runtime.tasks, config.broker)
    return runtime


def served_agents(config: RavenConfig, paths: Paths, names: Sequence[str]) -> list[ServedAgent]:
    """The configured agents `names`, to serve in Raven's place; `ConfigError` for a name
    not configured, disabled, or an A2A agent (serve it as itself instead)."""
    from raven.acp_client.served import ServedAgent

    known = {a.name: a for a in config.agents}
    served = []
    for name in dict.fromkeys(names):
        spec = known.get(name)
        if spec is None:
            listed = ", ".join(known) or "none are configured"
            raise ConfigError(f"no agent {name!r} to serve; agents: {listed}")
        if not spec.enabled:
            raise ConfigError(f"agent {name!r} is disabled (enabled: false)")
        if spec.over_a2a:
            raise ConfigError(
                f"agent {name!r} speaks A2A itself (protocol a2a-stdio): it needs no Raven "
                "to be served over A2A"
            )
        keep = config.a2a.server.max_concurrent_tasks
        served.append(ServedAgent(spec, keep, Sandbox.of(config, paths)))
    return served

"""The runtime a command works with: config, paths, and the tool sources the config asks
for (MCP servers, A2A peers, sub-agents), each imported only when configured."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from raven.config import Paths, RavenConfig, is_subagent
from raven.engine import Runtime


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

        sources.append(McpScope(config.mcp_servers, paths.logs_dir))
    stdio_agents = [a for a in config.agents if a.enabled and a.over_a2a]
    if (config.a2a.peers or stdio_agents) and not is_subagent(env):
        from raven.a2a_client.tool import A2ASendSource

        sources.append(A2ASendSource(config.a2a, stdio_agents))
    delegates = any(a.enabled and not a.over_a2a for a in config.agents)
    if delegates and not is_subagent(env):
        from raven.acp_client import AgentsSource

        sources.append(AgentsSource(config.agents))
    return Runtime(config, paths, face=face, tool_sources=sources)

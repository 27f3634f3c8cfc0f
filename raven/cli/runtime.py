"""Assembling the runtime a command works with: config, paths, and configured MCP servers."""

from __future__ import annotations

from raven.config import Paths, RavenConfig
from raven.engine import Runtime


def build_runtime(config: RavenConfig, paths: Paths, face: str) -> Runtime:
    """The runtime for `face`; `mcp` is imported only when servers are configured."""
    sources = []
    if any(s.enabled for s in config.mcp_servers):
        from raven.mcp import McpScope

        sources.append(McpScope(config.mcp_servers, paths.logs_dir))
    return Runtime(config, paths, face=face, tool_sources=sources)

"""Raven: a personal agent for the command line that speaks ACP, A2A and MCP.

The package is laid out as one engine with many faces; see `docs/` for users.
"""

__version__ = "0.1.0"
"""The one place Raven's version is written: the wheel, `raven --version`, the ACP
`agentInfo` and the A2A card all read it."""

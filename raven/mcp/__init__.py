"""The MCP client: tools and resources from MCP servers as tools of Raven's turns.

Owns the connections to MCP servers and their child processes, for one scope at
a time (the process, or one session). Imports the `mcp` SDK; import this
package only when a server is configured or attached.
"""

from raven.mcp.scope import McpScope, ServerStatus

__all__ = ["McpScope", "ServerStatus"]

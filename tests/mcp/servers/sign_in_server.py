"""A real MCP server (the official SDK, stdio) whose one tool needs the user to sign in
first: `connect` asks its client for a URL consent (elicitation in url mode), appends
the action it was told to the file named by its first argument, and returns it."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer

SIGN_IN_URL = "https://notes.example/oauth/authorize?client_id=raven-test"
server = MCPServer("notes")


@server.tool()
async def connect(ctx: Context) -> str:
    """Connect the notes account (asks the user to sign in)."""
    told = await ctx.session.elicit_url("Sign in to Notes", SIGN_IN_URL, "sign-in-1")
    with open(sys.argv[1], "a", encoding="utf-8") as record:
        record.write(told.action + "\n")
    return f"told: {told.action}"


if __name__ == "__main__":
    server.run()

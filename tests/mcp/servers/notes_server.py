"""A real MCP server for tests, on the official SDK: stdio by default, or
streamable HTTP on loopback with `--http PORT`.

`--crash` exits before the handshake; `--hang` never answers it; `--pidfile PATH`
writes the server's pid there once it runs.
"""

from __future__ import annotations

import base64
import os
import sys
import time

# Before the SDK's import (a second of it): a server that fails or hangs does so at once.
if "--crash" in sys.argv:
    sys.stderr.write("notes server: refusing to start\n")
    sys.exit(3)
if "--hang" in sys.argv:
    time.sleep(3600)

from mcp.server.mcpserver import Image, MCPServer

if "--pidfile" in sys.argv:
    with open(sys.argv[sys.argv.index("--pidfile") + 1], "w") as pidfile:
        pidfile.write(str(os.getpid()))

server = MCPServer("notes")
NOTES = {"groceries": "eggs, milk", "todo": "write tests"}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@server.tool()
def read_note(name: str) -> str:
    """Read a note by name."""
    if name not in NOTES:
        raise ValueError(f"no note called {name}")
    return NOTES[name]


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two numbers; returns structured content."""
    return {"sum": a + b}


@server.tool()
def whoami() -> str:
    """The server's process id and an environment variable."""
    return f"pid={os.getpid()} token={os.environ.get('NOTES_TOKEN', '')}"


@server.tool()
def save_text(path: str, text: str) -> str:
    """Write `text` to the file at `path` (relative to the server's directory)."""
    with open(path, "w") as out:
        out.write(text)
    return f"wrote {path}"


@server.tool()
def load_text(path: str) -> str:
    """The text of the file at `path`."""
    with open(path) as file:
        return file.read()


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=PNG, format="png")


@server.resource("notes://{name}")
def note_resource(name: str) -> str:
    """A note as a resource."""
    return NOTES.get(name, "")


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()

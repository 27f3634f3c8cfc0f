"""What `raven acp` answers to `initialize`: a pure function with no heavy imports.

Shared by the full server and the start-up path that answers `initialize` before
the engine is loaded, so both say exactly the same thing.
"""

from __future__ import annotations

from typing import Any

from raven import __version__

PROTOCOL_VERSION = 1
SETUP_METHOD = {
    "id": "setup",
    "name": "Set up a model",
    "description": "Run `raven setup` in a terminal: it finds local model servers or takes a "
    "provider, writes Raven's config and tests one turn.",
    "type": "agent",
}
"""What a session needs first is a model; `session/new` without one answers -32000 naming
this method."""


def initialize_result() -> dict[str, Any]:
    """The `initialize` result: protocol version, what Raven serves, who it is."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            "_meta": {"raven": {"steer": True}},
        },
        "agentInfo": {"name": "raven", "title": "Raven", "version": __version__},
        "authMethods": [SETUP_METHOD],
    }

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


def setup_method(params: dict[str, Any]) -> dict[str, Any]:
    """The setup method as this client can run it: in its own terminal (the agent's command
    with `setup` for arguments) when it says it can (`auth.terminal`), else as a pointer."""
    capabilities = params.get("clientCapabilities")
    auth = capabilities.get("auth") if isinstance(capabilities, dict) else None
    if isinstance(auth, dict) and auth.get("terminal") is True:
        return {**SETUP_METHOD, "type": "terminal", "args": ["setup"]}
    return SETUP_METHOD


def shows_subagents(params: dict[str, Any]) -> bool:
    """The client shows sub-agents as child sessions (`clientCapabilities.subagents`)."""
    capabilities = params.get("clientCapabilities")
    return isinstance(capabilities, dict) and isinstance(capabilities.get("subagents"), dict)


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    """The `initialize` result for the client's `params`: protocol version, what Raven
    serves, who it is, and how to set it up."""
    sessions: dict[str, Any] = {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "fork": {},
    }
    if shows_subagents(params):
        sessions["subagents"] = {}
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": sessions,
            "_meta": {"raven": {"steer": True}},
        },
        "agentInfo": {"name": "raven", "title": "Raven", "version": __version__},
        "authMethods": [setup_method(params)],
        # The steering extension as Claude's and Codex's adapters advertise it.
        "_meta": {"steering": {"supported": True}},
    }

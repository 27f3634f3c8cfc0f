"""The A2A server face: Raven as an A2A v1.0 agent over HTTP JSON-RPC.

Owns the agent card, the task service (`raven.a2a.service`: every task, new or
stored, one writer each), a task's turn on the engine (`raven.a2a.turn`), bearer
authentication and the aiohttp binding. It uses `a2a-sdk`'s types, task manager
and (versioned) stores, never its request handler. `add_a2a_routes` mounts
it on any aiohttp application (standalone or the gateway). Imports `a2a` and
`aiohttp`.
"""

from raven.a2a.tracing import load_sdk_telemetry

load_sdk_telemetry()

from raven.a2a.mount import A2AMount, Served, SubagentRefused, build_mounts  # noqa: E402
from raven.a2a.routes import add_a2a_routes  # noqa: E402

__all__ = ["A2AMount", "Served", "SubagentRefused", "add_a2a_routes", "build_mounts"]

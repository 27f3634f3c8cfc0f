"""The composition root: the runtime a command works with, its tool sources chosen from the
config, and the faces served together (A2A mounted on the gateway).

Commands call it; no face, client or engine module imports it.
"""

from raven.compose.runtime import build_runtime, served_agents

__all__ = ["build_runtime", "served_agents"]

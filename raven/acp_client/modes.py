"""The session mode Raven keeps a sub-agent in: of the modes the agent declares, the one
that asks before every edit and command, so that Raven's rules decide what it does
whatever the agent's own default (claude-agent-acp starts in Claude's `auto`, codex-acp
in `agent`, where each approves for itself). Never picks a mode that approves on its own:
an agent whose declared modes have none that asks is refused, naming the setting.
"""

from __future__ import annotations

from raven.acp.protocol import SessionModes
from raven.config import AgentSpec
from raven.errors import RavenError

ASKING_MODES = ("default", "read-only", "ask")
"""Mode ids that ask before every edit and command, as the adapters document them:
Claude Code's and gemini's `default`, Codex's `read-only`, a Raven's own `ask`."""


ALWAYS_LEAVES_MODE = frozenset({"gemini-cli"})
"""Agents (by the name they give in `initialize`) whose "allow always" is a switch out of
the mode that asks: gemini-cli's, for an edit, is to `autoEdit`, which it refuses in a
folder it does not trust (the edit fails) and which, in one it trusts, would keep its
later edits from Raven. Raven grants them once (`grants`)."""


def grants(agent_name: str | None, order: tuple[str, ...]) -> tuple[str, ...]:
    """The allow options to pick from, in order, for an agent kept in its asking mode."""
    if agent_name in ALWAYS_LEAVES_MODE:
        return ("allow_once", *(kind for kind in order if kind != "allow_once"))
    return order


class NoAskingMode(RavenError):
    """The agent declares modes and none of them asks (or not the one configured)."""


def asking_mode(spec: AgentSpec, modes: SessionModes | None) -> str | None:
    """The mode to keep the agent's session in; None when it declares no modes and none
    is configured (it offers nothing to choose from)."""
    declared = [m.id for m in modes.available_modes] if modes is not None else []
    if spec.mode is not None:
        if spec.mode not in declared:
            raise NoAskingMode(
                f"sub-agent {spec.name}: its mode {spec.mode!r} (agents[].mode) is not one "
                f"it declares ({', '.join(declared) or 'it declares none'})"
            )
        return spec.mode
    if not declared:
        return None
    found = next((m for m in ASKING_MODES if m in declared), None)
    if found is None:
        raise NoAskingMode(
            f"sub-agent {spec.name} declares the modes {', '.join(declared)} and none Raven "
            f"knows to ask before every edit and command ({', '.join(ASKING_MODES)}); Raven "
            "will not let it approve its own work. Set agents[].mode to the one that asks."
        )
    return found

"""Choosing a sub-agent's permission option by the agent's policy. Pure; never invents an id.

`auto` takes allow_always, then allow_once; `auto-once` allow_once, then allow_always
(an agent may keep an "always" grant after the task: codex writes a rule, gemini
switches its session to auto-edit); with no allow option, reject_once, then
reject_always; with no options, the cancelled outcome. `read-only` allows only
tool calls of a reading kind and rejects the rest. (`ask` is decided by a person,
through the parent turn; see `raven.acp_client.agent`.)
"""

from __future__ import annotations

from collections.abc import Sequence

from raven.acp.protocol import OfferedOption

READING_KINDS = frozenset({"read", "search", "fetch", "think"})
_ALLOW = ("allow_always", "allow_once")
_ALLOW_ONCE_FIRST = ("allow_once", "allow_always")
_REJECT = ("reject_once", "reject_always")


def pick(options: Sequence[OfferedOption], kinds: Sequence[str]) -> str | None:
    """The id of the first offered option whose kind comes first in `kinds`; None if none."""
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


def choose(policy: str, options: Sequence[OfferedOption], tool_kind: str | None) -> str | None:
    """The option id `policy` selects for a tool call of `tool_kind`; None means cancelled."""
    if not options:
        return None
    if policy == "auto-once":
        return pick(options, (*_ALLOW_ONCE_FIRST, *_REJECT))
    allowed = policy == "auto" or (policy == "read-only" and tool_kind in READING_KINDS)
    order = (*_ALLOW, *_REJECT) if allowed else _REJECT
    return pick(options, order)

"""Deciding a sub-agent's permission request: judged by what it does, then decided by the
agent's rules, then by its `permissions` preset. Never invents an option id; reads no
file (paths are resolved, links followed, against the working directory).

What the request does comes from its content, not from the label the child gave it:
a request carrying a command line is `execute` whatever its kind says, and one
carrying new file content is `edit`. So a `rm -rf ~` labelled "read" is judged a
command, and `read-only` rejects it.

The presets: `auto` allows (allow_always, then allow_once: an agent may keep an
"always" grant after the task: codex writes a rule, gemini switches its session to
auto-edit); `auto-once` allows once first; `read-only` allows reading kinds (always
first) and rejects the rest; `ask` escalates to the person. A rule's `allow` allows
once first, so the child asks again next time and the rules judge that too. With no
allow option offered, an allowed request takes reject_once, then reject_always; with
no options at all, the cancelled outcome.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from raven.acp.protocol import OfferedOption
from raven.config import AgentRule, AgentSpec

Action = Literal["allow", "reject", "escalate"]

READING_KINDS = frozenset({"read", "search", "fetch", "think"})
ALLOW = ("allow_always", "allow_once")
ALLOW_ONCE_FIRST = ("allow_once", "allow_always")
REJECT = ("reject_once", "reject_always")

_COMMAND_KEYS = ("command", "cmd", "commandLine", "command_line", "script")
_PATH_KEYS = ("path", "file_path", "filePath", "filename", "notebook_path", "abs_path", "cwd")
_EDIT_KEYS = (
    "content",
    "new_text",
    "newText",
    "new_string",
    "newString",
    "new_source",
    "patch",
    "diff",
    "edits",
)
_SHELL_OPERATORS = re.compile(r"[;&|<>`\n]|\$\(")
"""What lets one command line run another program, or write a file."""


@dataclass(frozen=True)
class Judged:
    """What a permission request does."""

    kind: str
    label: str | None
    """The kind the child gave it (None: none)."""
    command: str | None
    """The command line it runs."""
    paths: tuple[Path, ...]
    """The files it touches, absolute."""


@dataclass(frozen=True)
class Verdict:
    action: Action
    by: str
    """What decided: "rule 2", or the preset's name."""
    order: tuple[str, ...] = ALLOW_ONCE_FIRST
    """The option kinds an allow takes, first offered first."""


def judge(
    label: str | None,
    raw_input: Mapping[str, Any] | None,
    locations: Iterable[str],
    cwd: Path,
) -> Judged:
    """The request of a tool call labelled `label`, with `raw_input` and the paths its
    locations and diffs name."""
    given = raw_input or {}
    command = _command(given)
    named = [*locations, *(v for k in _PATH_KEYS if isinstance(v := given.get(k), str))]
    paths = tuple((cwd / Path(p).expanduser()).resolve() for p in named if p)
    if command is not None:
        kind = "execute"
    elif any(key in given for key in _EDIT_KEYS) and label not in ("edit", "delete", "move"):
        kind = "edit"
    else:
        kind = label or "other"
    return Judged(kind, label, command, paths)


def decide(spec: AgentSpec, judged: Judged, cwd: Path) -> Verdict:
    """The first of the agent's rules that applies, else its preset."""
    for number, rule in enumerate(spec.rules, start=1):
        if _applies(rule, judged, cwd.resolve()):
            return Verdict(rule.action, f"rule {number}")
    preset = spec.permissions
    if preset == "auto":
        return Verdict("allow", preset, ALLOW)
    if preset == "auto-once":
        return Verdict("allow", preset)
    if preset == "read-only":
        reading = judged.kind in READING_KINDS
        return Verdict("allow" if reading else "reject", preset, ALLOW)
    return Verdict("escalate", preset)


def pick(options: Sequence[OfferedOption], kinds: Sequence[str]) -> str | None:
    """The id of the first offered option whose kind comes first in `kinds`; None if none."""
    for kind in kinds:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


def _applies(rule: AgentRule, judged: Judged, cwd: Path) -> bool:
    if rule.kind is not None and judged.kind not in rule.kind:
        return False
    if rule.paths is not None:
        inside = [p.is_relative_to(cwd) for p in judged.paths]
        if rule.paths == "inside" and not (inside and all(inside)):
            return False
        if rule.paths == "outside" and all(inside):
            return False
    if rule.commands is not None:
        program = _program(judged.command)
        if program is None or program not in rule.commands:
            return False
    return True


def _command(given: Mapping[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = given.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return shlex.join(value)
    return None


def _program(command: str | None) -> str | None:
    """The one program `command` runs, by name; None when it could run more than one."""
    if command is None or _SHELL_OPERATORS.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0]:  # `VAR=value prog`: an environment for another
        return None
    return os.path.basename(words[0])

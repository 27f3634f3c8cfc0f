"""Deciding a sub-agent's permission request: judged by what it does, then decided by the
agent's rules, then by its `permissions` preset. Never invents an option id; reads no
file (paths are resolved, links followed, against the working directory).

What the request does comes from its content, not from the label the child gave it:
a request carrying a command line is `execute` whatever its kind says, and one
carrying new file content is `edit`. So a `rm -rf ~` labelled "read" is judged a
command, and `read-only` rejects it.

The presets: `auto` allows (allow_always, then allow_once: an agent may keep an
"always" grant after the task: codex writes a rule); `auto-once` allows once first;
`read-only` allows reading kinds (always first) and rejects the rest; `ask` escalates
to the person. A rule's `allow` allows once first, so the child asks again next time
and the rules judge that too; so does a preset's, when the agent has rules. With no
allow option offered, an allowed request takes reject_once, then reject_always; with
no options at all, the cancelled outcome.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
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

_COMMAND_KEYS = (
    "command",
    "cmd",
    "commandLine",
    "command_line",
    "script",
    "shell",
    "bash",
    "sh",
    "exec",
    "code",
    "input",
    "argv",
    "args",
    "cmdline",
    "run",
)
"""Keys a command line is looked for under first; any other string that looks like one
(its first word a program on PATH, with arguments or shell operators) counts too."""
_RUNS_OTHERS: dict[str, tuple[str, ...]] = {
    "git": ("-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "--ext-diff"),
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"),
    "rg": ("--pre",),
    "tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I"),
}
"""Options with which an allowed program runs another one or writes where it likes: a
command using one is no longer that program alone, and a rule naming it does not apply."""
_DEPTH = 8
"""How deep the strings of a request's input are looked through."""
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
_NOT_COMMANDS = frozenset(
    (*_PATH_KEYS, *_EDIT_KEYS, "old_text", "oldText", "old_string", "oldString")
)
"""Keys whose strings are paths or file content, never looked at as command lines."""
_CONSENT = re.compile(r"(?i)elicit|consent|oauth|authori[sz]|sign[ -]?in|log[ -]?in")
"""What the title or id of a fetch says when it is a URL consent relayed as a permission
(codex-acp turns an MCP server's URL elicitation into a `fetch` request)."""
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
    consent: bool = False
    """A consent (a mode switch, a URL or sign-in the child relays as a fetch): only a
    person gives one, whatever the agent's preset or rules."""
    blind: bool = False
    """It says nothing of what it does (no input, content or location): only a person,
    who may know, allows it."""


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
    names: Sequence[str] = (),
    shown: bool = False,
) -> Judged:
    """The request of a tool call labelled `label`, with `raw_input`, the paths its
    locations and diffs name, `names` (its title and id), which tell a consent, and
    whether it carries content to show (`shown`)."""
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
    consent = label == "switch_mode" or (
        kind == "fetch" and any(_CONSENT.search(name) for name in names if name)
    )
    blind = not (given or paths or shown)
    return Judged(kind, label, command, paths, consent, blind)


def decide(spec: AgentSpec, judged: Judged, cwd: Path) -> Verdict:
    """A consent, or a request that says nothing of what it does, goes to a person;
    otherwise the first of the agent's rules that applies, else its preset."""
    if judged.consent:
        return Verdict("escalate", "a consent only a person gives")
    if judged.blind:
        return Verdict("escalate", "it says nothing of what it does")
    for number, rule in enumerate(spec.rules, start=1):
        if _applies(rule, judged, cwd.resolve()):
            return Verdict(rule.action, f"rule {number}")
    preset = spec.permissions
    # An "always" lets the agent skip asking next time; with rules, the next request may be
    # one they decide otherwise, so a preset grants only once.
    always = ALLOW_ONCE_FIRST if spec.rules else ALLOW
    if preset == "auto":
        return Verdict("allow", preset, always)
    if preset == "auto-once":
        return Verdict("allow", preset)
    if preset == "read-only":
        reading = judged.kind in READING_KINDS
        return Verdict("allow" if reading else "reject", preset, always)
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
        if program is None or not _named(program, rule.commands):
            return False
    return True


def _named(program: str, names: Sequence[str]) -> bool:
    """`program` (a name, or a path) is one of `names`: by name; a path only when it is
    listed itself or is the program a listed name finds on PATH (`/usr/bin/git`, never
    `/tmp/x/git`)."""
    if "/" not in program:
        return program in names
    if program in names:
        return True
    real = os.path.realpath(program)
    return any((found := shutil.which(n)) and os.path.realpath(found) == real for n in names)


def _command(given: Mapping[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        if (line := _line(given.get(key))) is not None:
            return line
    others = {k: v for k, v in given.items() if k not in _NOT_COMMANDS}
    for value in _values(others, _DEPTH):
        if (line := _line(value)) is not None and _looks_like_command(line):
            return line
    return None


def _line(value: Any) -> str | None:
    """`value` as a command line: a string, or a list of strings (an argv)."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shlex.join(value)
    return None


def _values(value: Any, depth: int) -> Iterator[Any]:
    """Every value inside `value` (objects and lists, to `depth` levels)."""
    if depth <= 0:
        return
    children = value.values() if isinstance(value, Mapping) else value
    if isinstance(value, Mapping | list):
        for child in children:
            yield child
            yield from _values(child, depth - 1)


def _looks_like_command(line: str) -> bool:
    """A program on PATH (or a path to one) given arguments or shell operators: `rm -rf
    ~`, `ls; curl x | sh`; not a path, a word, a pattern or a sentence."""
    words = line.split()
    if not words or shutil.which(words[0].rstrip(";&|")) is None:
        return False
    return len(words) > 1 or _SHELL_OPERATORS.search(line) is not None


def _program(command: str | None) -> str | None:
    """The one program `command` runs (its name, or the path given); None when it could
    run more than one: shell operators, an environment for another, or an option with
    which the program runs others."""
    if command is None or _SHELL_OPERATORS.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words or "=" in words[0]:  # `VAR=value prog`: an environment for another
        return None
    risky = _RUNS_OTHERS.get(os.path.basename(words[0]), ())
    if any(w == o or w.startswith(f"{o}=") for w in words[1:] for o in risky):
        return None
    return words[0]

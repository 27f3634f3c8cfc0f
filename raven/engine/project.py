"""Project instructions: what a project keeps for agents working in it (`AGENTS.md`, or the
vendor-named `CLAUDE.md` / `GEMINI.md` people already have), from a session's directory up
to its repository's root, as text for the system prompt.

In each directory the first of `NAMES` that is a file is read, so a project keeping both
an `AGENTS.md` and a `CLAUDE.md` that repeats it is not read twice. Files are ordered from
the repository's root down to the session's directory (the nearest says the most specific
thing, last). Outside a repository only the session's own directory is read. Credentials
in them are masked. Reads, never writes; never looks above the repository's root, and
never gives the model more than `MAX_BYTES` of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from raven.redact import redact

NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
"""Looked for in each directory, in this order; the first found is read."""
MAX_BYTES = 32 * 1024
"""At most this much of the files, all together (Codex keeps the same bound)."""

_LEAD = (
    "# Project instructions\n\n"
    "The project keeps these instructions for agents working in it. Follow them; the "
    "user's own words in this conversation come first."
)


@dataclass(frozen=True)
class ProjectInstructions:
    """The files read (root first) and the text they make for the system prompt."""

    files: tuple[Path, ...] = ()
    text: str = ""

    def names(self, cwd: Path) -> list[str]:
        """The files read, as paths relative to the session's directory (`../AGENTS.md`)."""
        return [_shown(path, cwd) for path in self.files]


NONE = ProjectInstructions()


def read_project_instructions(cwd: Path) -> ProjectInstructions:
    """The instructions for a session working in `cwd`; `NONE` when it has none."""
    found = [Path(file) for folder in _folders(str(cwd)) if (file := _first_file(folder))]
    if not found:
        return NONE
    sections, left = [_LEAD], MAX_BYTES
    for path in found:
        try:
            raw = path.read_bytes()
        except OSError:
            continue  # gone or unreadable since it was found: as if it were not there
        body = raw[:left].decode("utf-8", errors="replace").strip()
        if len(raw) > left:
            body += f"\n\n[… the rest of this file is past the {MAX_BYTES // 1024} KiB limit]"
        left -= min(len(raw), left)
        sections.append(f"## {_shown(path, cwd)}\n\n{body}")
        if left <= 0:
            break
    return ProjectInstructions(tuple(found), redact("\n\n".join(sections)))


def _folders(cwd: str) -> list[str]:
    """`cwd` and its parents up to the repository's root, root first; `[cwd]` outside one.
    Strings and `os.path`, not `Path`: read as every turn starts, a few stats each."""
    chain, folder = [cwd], cwd
    while (parent := os.path.dirname(folder)) != folder:
        chain.append(parent)
        folder = parent
    for depth, folder in enumerate(chain):
        if os.path.exists(os.path.join(folder, ".git")):  # a directory, or a worktree's file
            return chain[depth::-1]
    return [cwd]


def _first_file(folder: str) -> str | None:
    """The first of `NAMES` that is a file in `folder` (none in a folder Raven may not
    look into)."""
    for name in NAMES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def _shown(path: Path, cwd: Path) -> str:
    """`path` as the model should name it: relative to the session's directory."""
    return os.path.relpath(path, cwd)

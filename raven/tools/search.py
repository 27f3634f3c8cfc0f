"""The search tool: a regular expression over the files under a directory.

Skips `.git` and what git ignores (through `git ls-files` inside a work tree,
the root `.gitignore` otherwise). Read-only.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from raven.tools.base import Args, BuiltinTool, ToolContext, ToolError, ToolOutput

MAX_MATCHES = 200
MAX_FILE_BYTES = 2 * 1024 * 1024
_GIT_TIMEOUT_S = 10.0
_ALWAYS_SKIPPED = {".git", ".hg", ".svn"}


class SearchArgs(Args):
    pattern: str = Field(description="Python regular expression")
    path: str = Field(default=".", description="Directory or file to search")
    glob: str | None = Field(default=None, description="Only files whose name matches, e.g. *.py")


class Search(BuiltinTool):
    name: ClassVar[str] = "search"
    description: ClassVar[str] = (
        "Search file contents with a regular expression; prints path:line: text. "
        "Skips .git and git-ignored files."
    )
    kind = "read"
    needs_approval = False
    args_model = SearchArgs

    def title(self, args: SearchArgs, ctx: ToolContext) -> str:
        return f"Search {args.pattern!r} in {args.path}"

    def locations(self, args: SearchArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def run(self, args: SearchArgs, ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression: {exc}") from exc
        root = ctx.reach(args.path)
        if not root.exists():
            raise ToolError(f"{args.path}: no such file or directory")

        def readable(path: Path) -> bool:  # what the session's sandbox lets it read
            return ctx.sandbox.refusal(path, ctx.cwd, write=False) is None

        text = await asyncio.to_thread(_search, regex, root, args.glob, ctx.cwd, readable)
        return ToolOutput(text)


def _search(
    regex: re.Pattern[str],
    root: Path,
    glob: str | None,
    cwd: Path,
    readable: Callable[[Path], bool],
) -> str:
    hits: list[str] = []
    for path in _candidate_files(root):
        if glob and not fnmatch.fnmatch(path.name, glob):
            continue
        if not readable(path):
            continue
        for lineno, line in _lines(path):
            if regex.search(line):
                shown = path.relative_to(cwd) if path.is_relative_to(cwd) else path
                hits.append(f"{shown}:{lineno}: {line.rstrip()[:300]}")
                if len(hits) >= MAX_MATCHES:
                    hits.append(f"(stopped after {MAX_MATCHES} matches; narrow the search)")
                    return "\n".join(hits)
    return "\n".join(hits) if hits else "no matches"


def _candidate_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    listed = _git_files(root)
    if listed is not None:
        return listed
    ignore = _root_gitignore(root)
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _ALWAYS_SKIPPED and not _ignored(d, ignore)
        )
        found.extend(Path(dirpath) / f for f in sorted(filenames) if not _ignored(f, ignore))
    return found


def _git_files(root: Path) -> list[Path] | None:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    files = [root / name for name in out.decode("utf-8", "replace").split("\0") if name]
    return sorted(f for f in files if f.is_file())


def _root_gitignore(root: Path) -> list[str]:
    try:
        lines = (root / ".gitignore").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [ln.strip().strip("/") for ln in lines if ln.strip() and not ln.startswith(("#", "!"))]


def _ignored(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _lines(path: Path) -> list[tuple[int, str]]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    if b"\x00" in data[:8192]:
        return []
    text = data.decode("utf-8", "replace")
    return list(enumerate(text.splitlines(), start=1))

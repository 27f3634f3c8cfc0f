"""A sub-agent task's own git worktree: made from HEAD on a branch of its own before the
task, its changes committed there and summed up after, the worktree then removed and the
branch kept for the person to merge or discard.

Never touches the person's working tree, index or current branch; every git command has
a deadline. The worktrees live in the repository's git directory (`raven-worktrees/`),
the branches under `raven/<agent>/`.

A worktree shares its repository's git directory, hooks included, and the child can
write there. So Raven's own git commands run no hook (`core.hooksPath` to nowhere: a
hook the child planted never runs as the person during Raven's commit), and the hooks
are put back as they were when the task ends: none the child added or changed stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from raven.errors import RavenError
from raven.holders import gone, this_process

log = logging.getLogger(__name__)

GIT_TIMEOUT_S = 60.0
BRANCH_PREFIX = "raven/"
SLUG_CHARS = 40
_NO_HOOKS = ("-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false")
"""Given to every git command Raven runs: no hook, no file-system monitor command."""
_IDENTITY = ("-c", "user.name=Raven", "-c", "user.email=raven@localhost")
"""Who Raven's commits of a sub-agent's work are by: Raven, not the person, whose name
goes on the merge."""


class WorktreeError(RavenError):
    """No worktree could be made or summed up: not a git project, or git failed."""


@dataclass(frozen=True)
class Change:
    path: str
    added: int | None
    """Lines added; None for a binary file."""
    removed: int | None


@dataclass(frozen=True)
class Worktree:
    repo: Path
    """The person's repository (its top level)."""
    path: Path
    """The worktree's top level."""
    branch: str
    base: str
    """The commit it started from."""
    hooks: Path | None
    """The repository's hooks folder, which the child can reach (None: not watched, for
    a worktree found left behind)."""
    hooks_before: dict[str, tuple[bytes, int]]
    """Each hook file as the task found it: its content and mode."""

    def where(self, cwd: Path) -> Path:
        """`cwd` (in the person's repository) as the same place in the worktree."""
        return self.path / cwd.resolve().relative_to(self.repo)


async def open_worktree(cwd: Path, agent: str, task: str) -> Worktree:
    """A fresh worktree of the repository `cwd` is in, on a new branch named after `agent`
    and `task`; `WorktreeError` outside a git project."""
    try:
        top = Path(await git(cwd, "rev-parse", "--show-toplevel"))
    except WorktreeError:
        raise WorktreeError(
            f"sub-agent {agent} works in a git worktree (isolation: worktree), but {cwd} "
            "is not in a git project; run `git init` there, or drop the entry's isolation"
        ) from None
    try:
        base = await git(top, "rev-parse", "--verify", "HEAD^{commit}")
    except WorktreeError:
        raise WorktreeError(
            f"sub-agent {agent} works in a git worktree, which starts from a commit; "
            f"the repository at {top} has none yet"
        ) from None
    common = Path(await git(top, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    await _sweep(top, common / "raven-worktrees")
    short = uuid.uuid4().hex[:6]
    branch = f"{BRANCH_PREFIX}{agent}/{slug(task)}-{short}"
    path = common / "raven-worktrees" / f"{agent}-{short}"
    await git(top, "worktree", "add", "--quiet", "-b", branch, str(path), base)
    hooks = common / "hooks"
    tree = Worktree(top, path, branch, base, hooks, _files(hooks))
    owner = {"holder": this_process(), "branch": branch, "base": base}
    _owner_file(path).write_text(json.dumps(owner), encoding="utf-8")
    return tree


def _owner_file(path: Path) -> Path:
    """Beside a worktree: which Raven made it, for what branch and base."""
    return path.with_name(path.name + ".raven.json")


async def _sweep(repo: Path, folder: Path) -> None:
    """Close the worktrees a Raven killed mid-task left (its process gone): their work is
    committed on their branch (a branch with none is deleted) and the worktree removed,
    as at a task's end; the next task finds the repository as the last one left it."""
    for left, owner_file in await asyncio.to_thread(_left_behind, repo, folder):
        log.warning("closing worktree %s, left by a Raven stopped mid-task", left.path)
        try:
            if left.path.is_dir():
                await close_worktree(left, "unfinished: Raven was stopped during the task")
            else:
                await git(repo, "worktree", "prune")
        except WorktreeError as exc:
            log.warning("could not close worktree %s: %s", left.path, exc)
            continue
        owner_file.unlink(missing_ok=True)


def _left_behind(repo: Path, folder: Path) -> list[tuple[Worktree, Path]]:
    """The worktrees in `folder` whose Raven is gone, each with its owner file."""
    found = []
    for owner_file in sorted(folder.glob("*.raven.json")):
        try:
            owner = json.loads(owner_file.read_text(encoding="utf-8"))
            if not gone(owner.get("holder")):
                continue
            path = owner_file.with_name(owner_file.name.removesuffix(".raven.json"))
            found.append(
                (Worktree(repo, path, owner["branch"], owner["base"], None, {}), owner_file)
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return found


async def close_worktree(tree: Worktree, message: str) -> list[Change]:
    """Commit what the task left in the worktree, remove it, and return the branch's
    changes since its base; a branch with none is deleted."""
    try:
        await git(tree.path, "add", "--all")
        if await git(tree.path, "status", "--porcelain"):
            await git(tree.path, *_IDENTITY, "commit", "--quiet", "--no-verify", "-m", message)
        changes = await changes_of(tree.repo, tree.base, tree.branch)
    finally:
        if tree.hooks is not None:
            _put_back(tree.hooks, tree.hooks_before)
        await git(tree.repo, "worktree", "remove", "--force", str(tree.path))
        _owner_file(tree.path).unlink(missing_ok=True)
    if not changes:
        await git(tree.repo, "branch", "--quiet", "-D", tree.branch)
    return changes


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """The regular files directly in `folder`: content and mode by name."""
    found: dict[str, tuple[bytes, int]] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in folder.iterdir():
            if entry.is_file() and not entry.is_symlink():
                found[entry.name] = (entry.read_bytes(), entry.stat().st_mode & 0o7777)
    return found


def _put_back(folder: Path, before: dict[str, tuple[bytes, int]]) -> None:
    """Make `folder` hold `before` again: what was added (a file, a link, a folder) goes,
    what was changed or removed comes back; each is logged, for the person to know."""
    with contextlib.suppress(FileNotFoundError):
        for entry in folder.iterdir():
            kept = before.get(entry.name)
            if kept is not None and entry.is_file() and not entry.is_symlink():
                if (entry.read_bytes(), entry.stat().st_mode & 0o7777) == kept:
                    continue
            log.warning("a sub-agent left git hook %s; removed", entry)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    for name, (content, mode) in before.items():
        path = folder / name
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
            path.chmod(mode)


async def changes_of(repo: Path, base: str, branch: str) -> list[Change]:
    """The files `branch` changed since `base`, with their line counts."""
    changes = []
    for line in (await git(repo, "diff", "--numstat", f"{base}...{branch}")).splitlines():
        added, removed, path = line.split("\t", 2)
        if added == "-":  # a binary file
            changes.append(Change(path, None, None))
        else:
            changes.append(Change(path, int(added), int(removed)))
    return changes


async def require_identity(repo: Path) -> None:
    """Nothing when git knows who commits in `repo`; else `WorktreeError` saying what to
    set (git's own words, "unable to auto-detect email address", do not)."""
    try:
        await git(repo, "var", "GIT_COMMITTER_IDENT")
    except WorktreeError:
        raise WorktreeError(
            "git does not know who you are, and a merge is a commit in your name; "
            'set it once with `git config --global user.name "Your Name"` and '
            "`git config --global user.email you@example.com` (or without --global, "
            f"for {repo} alone), then merge again"
        ) from None


def summary(tree: Worktree, changes: list[Change]) -> str:
    """The lines the delegate answer ends with: what changed, where, and what to do."""
    if not changes:
        return "[no changes: nothing was left on a branch]"
    added = sum(c.added or 0 for c in changes)
    removed = sum(c.removed or 0 for c in changes)
    files = f"{len(changes)} file{'s' if len(changes) != 1 else ''}"
    lines = [f"[changes on branch {tree.branch}, not merged: {files}, +{added} -{removed}"]
    for c in changes:
        counts = "binary" if c.added is None else f"+{c.added} -{c.removed}"
        lines.append(f"  {c.path} {counts}")
    lines.append(
        f"the person reviews it (git diff {tree.base[:12]}...{tree.branch}), then merges it "
        f"with `raven agents merge {tree.branch}` or discards it with "
        f"`raven agents discard {tree.branch}`]"
    )
    return "\n".join(lines)


def slug(text: str) -> str:
    """`text` as a branch name's piece: lower-case words joined by dashes."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    joined = "-".join(words)[:SLUG_CHARS].strip("-")
    return joined or "task"


async def git(cwd: Path, *args: str) -> str:
    """`git args` in `cwd`: its stdout, stripped; `WorktreeError` with its stderr."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *_NO_HOOKS,
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise WorktreeError(f"cannot run git: {exc.strerror}") from None
    try:
        async with asyncio.timeout(GIT_TIMEOUT_S):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise WorktreeError(f"git {args[0]} took over {GIT_TIMEOUT_S:g}s") from None
    if proc.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        raise WorktreeError(f"git {args[0]} failed: {said[-1] if said else proc.returncode}")
    return out.decode(errors="replace").strip()

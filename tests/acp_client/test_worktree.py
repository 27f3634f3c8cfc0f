"""Worktree isolation: each task of an isolated agent runs in a git worktree of its own, so
two agents changing one file at once both keep their change, on branches left for review,
and the person's tree is untouched; `raven agents merge | discard` settle them."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from raven.acp_client import AgentsSource
from raven.config import AgentSpec, Limits
from raven.sandbox import kernel_version
from raven.tools import ToolContext, ToolError
from tests.children import scripted_child
from tests.conftest import raven

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@t", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "shared.txt").write_text("base\n")
    git(repo, "init", "--quiet", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "base")
    return repo


def writer(home: Path, name: str, content: str) -> AgentSpec:
    """A `raven acp` whose model writes src/shared.txt (run from src/), then says so."""
    write = {"name": "write_file", "arguments": {"path": "shared.txt", "content": content}}
    steps = [{"toolCalls": [write]}, {"text": "Wrote it."}]
    return AgentSpec(**scripted_child(home, steps, name=name, isolation="worktree"))


def context(cwd: Path) -> ToolContext:
    async def nobody(question: object) -> None:
        return None

    return ToolContext(cwd=cwd, limits=Limits(), ask=nobody, session_id="s")


async def test_two_agents_change_one_file_at_once_and_both_changes_are_kept(
    repo: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    source = AgentsSource(
        [
            writer(tmp_path / "a", "alpha", "from alpha\n"),
            writer(tmp_path / "b", "beta", "from beta\n"),
        ]
    )
    ctx = context(repo / "src")  # a session in a subdirectory: the same one in the worktree
    try:
        first, second = await asyncio.gather(
            source.delegate(ctx, "alpha", "Change shared.txt"),
            source.delegate(ctx, "beta", "Change shared.txt too"),
        )
    finally:
        await source.aclose()
    assert (repo / "src" / "shared.txt").read_text() == "base\n"  # the person's tree
    assert (
        git(repo, "status", "--porcelain") == "" and git(repo, "branch", "--show-current") == "main"
    )
    assert len(git(repo, "worktree", "list").splitlines()) == 1  # none left behind
    branches = {}
    for name, outcome in (("alpha", first), ("beta", second)):
        assert outcome.answer == "Wrote it."
        (branch,) = [
            b
            for b in git(
                repo, "branch", "--list", f"raven/{name}/*", "--format=%(refname:short)"
            ).splitlines()
        ]
        assert branch.startswith(f"raven/{name}/change-shared-txt")
        assert git(repo, "show", f"{branch}:src/shared.txt") == f"from {name}"
        assert f"changes on branch {branch}, not merged: 1 file, +1 -1" in outcome.changes
        assert "src/shared.txt +1 -1" in outcome.changes
        assert f"raven agents merge {branch}" in outcome.changes  # the parent model is told how
        branches[name] = branch

    listed = raven("agents", "branches", env=env, cwd=repo)
    assert branches["alpha"] in listed.stdout and "+1 -1" in listed.stdout
    # The tests see no git identity (tests/conftest.py), as on a fresh machine: a merge is
    # the person's commit, so Raven says what to set instead of git's own words.
    anonymous = raven("agents", "merge", branches["alpha"], env=env, cwd=repo)
    assert anonymous.returncode == 1
    assert "git config --global user.email" in anonymous.stderr, anonymous.stderr
    assert "auto-detect" not in anonymous.stderr
    assert git(repo, "branch", "--list", branches["alpha"]) != ""  # nothing was touched
    git(repo, "config", "user.name", "Person")
    git(repo, "config", "user.email", "person@example.com")
    merged = raven("agents", "merge", branches["alpha"], env=env, cwd=repo)
    assert merged.returncode == 0, merged.stderr
    assert git(repo, "log", "-1", "--format=%ae") == "person@example.com"
    assert (repo / "src" / "shared.txt").read_text() == "from alpha\n"
    discarded = raven("agents", "discard", branches["beta"], env=env, cwd=repo)
    assert discarded.returncode == 0, discarded.stderr
    assert git(repo, "branch", "--list", "raven/*") == ""
    refused = raven("agents", "discard", "main", env=env, cwd=repo)
    assert refused.returncode == 2 and "not a sub-agent's branch" in refused.stderr


async def test_a_task_that_changes_nothing_leaves_no_branch(repo: Path, tmp_path: Path) -> None:
    spec = AgentSpec(
        name="quiet", protocol="cli", command="sh", args=["-c", "echo looked"], isolation="worktree"
    )
    outcome = await AgentsSource([spec]).delegate(context(repo), "quiet", "look around")
    assert outcome.answer.strip() == "looked"
    assert outcome.changes == "[no changes: nothing was left on a branch]"
    assert git(repo, "branch", "--list", "raven/*") == ""


async def test_outside_a_git_project_isolation_is_refused_saying_why(tmp_path: Path) -> None:
    spec = AgentSpec(name="cli", protocol="cli", command="true", isolation="worktree")
    with pytest.raises(ToolError, match="not in a git project"):
        await AgentsSource([spec]).delegate(context(tmp_path), "cli", "anything")


async def test_what_a_failed_task_changed_is_kept_and_the_error_says_where(repo: Path) -> None:
    spec = AgentSpec(
        name="flaky",
        protocol="cli",
        command="sh",
        args=["-c", "echo half > made.txt; echo broke >&2; exit 3"],
        isolation="worktree",
    )
    with pytest.raises(ToolError) as failed:
        await AgentsSource([spec]).delegate(context(repo), "flaky", "try it")
    said = str(failed.value)
    (branch,) = git(repo, "branch", "--list", "raven/flaky/*", "--format=%(refname:short)").split()
    assert "broke" in said and f"changes on branch {branch}" in said and "made.txt +1 -0" in said
    assert not (repo / "made.txt").exists()


async def test_a_hook_a_child_plants_never_runs_and_never_stays(repo: Path, tmp_path: Path) -> None:
    """The child can write the shared git directory: a post-commit hook it plants must not
    run during Raven's commit of its work (as the person, outside any worktree), and the
    hooks must be as they were once the task ends."""
    ran = tmp_path / "hook-ran"
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-push").write_text("#!/bin/sh\nexit 0\n")  # the person's own hook
    before = sorted(p.name for p in hooks.iterdir())
    plant = (
        'hooks="$(git rev-parse --path-format=absolute --git-common-dir)/hooks"; '
        f"printf '#!/bin/sh\\ntouch {ran}\\n' > \"$hooks/post-commit\"; "
        'chmod +x "$hooks/post-commit"; echo changed > "$hooks/pre-push"; '
        "echo work > made.txt; echo planted"
    )
    spec = AgentSpec(
        name="sly", protocol="cli", command="sh", args=["-c", plant], isolation="worktree"
    )
    outcome = await AgentsSource([spec]).delegate(context(repo), "sly", "do the work")
    assert outcome.answer.strip() == "planted" and "made.txt +1 -0" in outcome.changes
    assert not ran.exists()  # Raven's commit of the child's work ran no hook
    assert sorted(p.name for p in hooks.iterdir()) == before
    assert (hooks / "pre-push").read_text() == "#!/bin/sh\nexit 0\n"
    (branch,) = git(repo, "branch", "--list", "raven/sly/*", "--format=%(refname:short)").split()
    assert git(repo, "show", f"{branch}:made.txt") == "work"


async def test_a_worktree_left_by_a_killed_raven_is_closed_at_the_next_task(
    repo: Path, tmp_path: Path, env: dict[str, str], home: Path
) -> None:
    import json
    import signal

    from tests.conftest import RAVEN, write_config

    slow = {
        "name": "slow",
        "protocol": "cli",
        "command": "sh",
        "args": ["-c", "echo half > made.txt; exec sleep 300"],
        "isolation": "worktree",
    }
    write_config(home, {"defaultModel": "echo", "agents": [slow]})
    running = await asyncio.create_subprocess_exec(
        *RAVEN, "agents", "run", "slow", "go", env=env, cwd=repo,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    trees = repo / ".git" / "raven-worktrees"
    async with asyncio.timeout(30):
        while not list(trees.glob("*/made.txt")):
            await asyncio.sleep(0.05)
    running.send_signal(signal.SIGKILL)
    await running.wait()
    assert len(git(repo, "worktree", "list").splitlines()) == 2  # left behind
    (left,) = json.loads(next(trees.glob("*.raven.json")).read_text())["branch"].split()
    spec = AgentSpec(
        name="quiet", protocol="cli", command="sh", args=["-c", "echo looked"], isolation="worktree"
    )
    await AgentsSource([spec]).delegate(context(repo), "quiet", "look around")
    assert len(git(repo, "worktree", "list").splitlines()) == 1  # closed, and the new one too
    assert list(trees.iterdir()) == []
    assert git(repo, "show", f"{left}:made.txt") == "half"  # the killed task's work, kept
    assert (repo / "src" / "shared.txt").read_text() == "base\n"


@pytest.mark.skipif(kernel_version() < 1, reason="this kernel has no Landlock")
async def test_a_sandboxed_one_shot_agent_touches_nothing_outside_its_worktree(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, outside = tmp_path / "user", tmp_path / "outside"
    (user / ".ssh").mkdir(parents=True)
    (user / ".ssh" / "id_ed25519").write_text("planted-key")
    outside.mkdir()
    monkeypatch.setenv("HOME", str(user))
    script = (
        f'echo work > made.txt; echo out > "{outside}/x"; echo mine > "{repo}/src/shared.txt"; '
        f'cat "{user}/.ssh/id_ed25519"; echo done'
    )
    spec = AgentSpec(
        name="shell",
        protocol="cli",
        command="sh",
        args=["-c", script],
        isolation="worktree",
        sandbox="workspace",
    )
    outcome = await AgentsSource([spec]).delegate(context(repo), "shell", "go")
    assert "planted-key" not in outcome.answer and outcome.answer.endswith("done")
    assert not (outside / "x").exists()
    assert (repo / "src" / "shared.txt").read_text() == "base\n"  # the person's tree
    (branch,) = git(repo, "branch", "--list", "raven/shell/*", "--format=%(refname:short)").split()
    assert git(repo, "show", f"{branch}:made.txt") == "work"  # its own worktree's, kept

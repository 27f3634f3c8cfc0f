"""`raven run` in a mode that requires a sandbox, as a user runs it: a command that tries to
read a credential and write outside its directory is held by the kernel, and a machine
that cannot hold the sandbox refuses the command instead of running it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from raven.sandbox import kernel_version
from tests.children import scripted_child
from tests.conftest import raven, write_config

SECRET = "planted-ssh-key"


def configure(home: Path, tmp_path: Path, command: str) -> tuple[Path, Path]:
    (home / "script.json").write_text(
        json.dumps(
            [
                {"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]},
                {"text": "done"},
            ]
        )
    )
    modes = [{"id": "jailed", "name": "Jailed", "approvals": "auto", "sandbox": "workspace"}]
    models = [{"id": "s", "provider": "scripted", "script": "script.json"}]
    write_config(home, {"models": models, "modes": modes, "defaultMode": "jailed"})
    user, work = tmp_path / "user", tmp_path / "work"
    (user / ".ssh").mkdir(parents=True)
    (user / ".ssh" / "id_ed25519").write_text(SECRET)
    work.mkdir()
    return user, work


def shown_tool_output(env: dict[str, str], session: str) -> str:
    """What the session's tool calls returned, as `raven sessions show` has it."""
    shown = json.loads(raven("sessions", "show", session, "--json", env=env).stdout)
    return json.dumps([m for m in shown["messages"] if m["role"] == "tool"])


@pytest.mark.skipif(kernel_version() < 1, reason="this kernel has no Landlock")
def test_a_jailed_mode_holds_what_its_command_does(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    command = 'cat "$HOME/.ssh/id_ed25519"; echo out > ../outside.txt; echo in > inside.txt'
    user, work = configure(home, tmp_path, command)
    ran = raven("run", "go", env={**env, "HOME": str(user)}, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert (work / "inside.txt").read_text() == "in\n"
    assert not (tmp_path / "outside.txt").exists()
    (listed,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    said = shown_tool_output(env, listed["id"])
    assert SECRET not in said and "Permission denied" in said, said


def test_a_mode_requiring_a_sandbox_the_kernel_lacks_refuses_its_commands(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    user, work = configure(home, tmp_path, "echo ran > ran.txt")
    old_kernel = {**env, "HOME": str(user), "RAVEN_SANDBOX_ABI": "0"}
    ran = raven("run", "go", env=old_kernel, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert not (work / "ran.txt").exists()
    (listed,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    said = shown_tool_output(env, listed["id"])
    assert "requires the workspace sandbox" in said and "not run" in said, said
    shown = raven("config", "sandbox", env=old_kernel)
    assert "mode jailed: requires workspace: NOT enforced" in shown.stdout
    assert "(its commands are refused)" in shown.stdout


@pytest.mark.skipif(kernel_version() < 1, reason="this kernel has no Landlock")
def test_a_jailed_session_has_its_sub_agent_hold_the_sandbox_or_does_not_delegate(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    escape = "echo out > ../outside.txt; echo in > inside.txt"
    run = {"toolCalls": [{"name": "run_command", "arguments": {"command": escape}}]}
    helper = scripted_child(tmp_path / "child", [run, {"text": "child done"}])
    upper = {"name": "upper", "protocol": "cli", "command": "tr", "args": ["a-z", "A-Z"]}

    def delegate(agent: str) -> dict[str, Any]:
        return {"toolCalls": [{"name": "delegate", "arguments": {"agent": agent, "task": "go"}}]}

    user, work = configure(home, tmp_path, "true")
    (home / "script.json").write_text(
        json.dumps([delegate("helper"), delegate("upper"), {"text": "parent done"}])
    )
    config = json.loads((home / "config.json").read_text())
    write_config(home, {**config, "agents": [helper, upper]})
    ran = raven("run", "go", env={**env, "HOME": str(user)}, cwd=work, timeout=90)
    assert ran.returncode == 0, ran.stderr
    # The child Raven was asked for the workspace sandbox, and its command ran in it.
    assert (work / "inside.txt").read_text() == "in\n"
    assert not (tmp_path / "outside.txt").exists()
    listed = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    (parent,) = [s for s in listed if s["face"] != "subagent"]  # the child's is beside it
    said = shown_tool_output(env, parent["id"])
    assert "child done" in said
    # A one-shot command cannot be asked, and Raven holds none around it: not run.
    assert "upper cannot be held in it" in said, said

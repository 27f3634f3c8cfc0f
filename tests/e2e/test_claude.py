"""The real claude-agent-acp (pinned, from npm, with the Claude Code it brings) driven by
Raven offline, as installed: no settings file, so it would start in Claude's `auto` mode.
Its model API is a loopback fake of Anthropic's Messages API, its config a fresh folder,
and Raven launched as a user does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import raven, write_config
from tests.fakes.model_server import FakeModelServer, Reply, anthropic_stream
from tests.npm import npm_install

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes

CLAUDE_AGENT_ACP = "@agentclientprotocol/claude-agent-acp@0.101.0"
REQUESTS = 12
"""Replies queued per run: Claude Code's turn, its title and next-prompt side requests."""


@pytest.fixture(scope="module")
def claude_agent_acp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = npm_install(tmp_path_factory, CLAUDE_AGENT_ACP)
    return folder / "node_modules" / ".bin" / "claude-agent-acp"


def claude_agent(
    command: Path, config_dir: Path, model: FakeModelServer, permissions: str, **entry: Any
) -> dict[str, Any]:
    """An agents entry for claude-agent-acp with its own config folder, talking to `model`
    only. Claude Code refuses to run as root, as CI does, unless told it is in a sandbox."""
    config_dir.mkdir()
    env = {
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-claude",
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "IS_SANDBOX": "1",
    }
    return {
        "name": "claude",
        "command": str(command),
        "env": env,
        "permissions": permissions,
        **entry,
    }


def the_model(tool: str, tool_input: dict[str, Any]) -> Callable[[dict[str, Any]], Reply]:
    """Claude's model: in the agent's turn (its tools offered) it calls `tool` once, then says
    how the call went; Claude Code's side requests (a title, a next prompt) get a word."""

    def reply(body: dict[str, Any]) -> Reply:
        offered = {t.get("name") for t in body.get("tools", [])}
        last = body["messages"][-1]["content"]
        results = (
            [c for c in last if c.get("type") == "tool_result"] if isinstance(last, list) else []
        )
        if results:
            said = "was refused" if results[0].get("is_error") else "went through"
            return Reply(events=anthropic_stream(text=f"The {tool} call {said}."))
        if tool in offered:
            call = ("toolu_fake1", tool, json.dumps(tool_input))
            return Reply(events=anthropic_stream(tool_use=call))
        return Reply(events=anthropic_stream(text="Notes"))

    return reply


def run_claude(
    env: dict[str, str], home: Path, work: Path, agent: dict[str, Any], task: str
) -> dict[str, Any]:
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    ran = raven("agents", "run", "claude", task, "--json", env=env, cwd=work)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return json.loads(ran.stdout)


@pytest.mark.parametrize(
    ("permissions", "written", "decision"),
    [
        ("read-only", False, "reject once: Write note.txt (by read-only)"),
        ("auto", True, "allow always: Write note.txt (by auto)"),
    ],
)
def test_claude_as_installed_asks_raven_before_it_writes(
    claude_agent_acp: Path,
    model_server: FakeModelServer,
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    permissions: str,
    written: bool,
    decision: str,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    model_server.replies.clear()  # what the first run left unasked
    model_server.queue(*[the_model("Write", {"file_path": str(note), "content": "hi"})] * REQUESTS)
    agent = claude_agent(claude_agent_acp, tmp_path / "claude", model_server, permissions)
    out = run_claude(env, home, work, agent, "write note.txt")
    assert out["decisions"] == [decision]
    assert note.exists() is written
    said = "went through" if written else "was refused"
    assert out["answer"].strip() == f"The Write call {said}."
    keys = {r.headers.get("x-api-key") for r in model_server.requests}
    assert keys == {"sk-ant-fake-claude"}  # the entry's key, to the entry's base URL only


def test_an_escalate_rule_sees_claudes_command_under_auto(
    claude_agent_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Nobody answers `raven agents run` here (no terminal): the escalated command is
    refused, and the decision says so."""
    work = tmp_path / "work"
    work.mkdir()
    command = "echo hi > made.txt"
    model_server.queue(*[the_model("Bash", {"command": command, "description": "note"})] * REQUESTS)
    rules = [{"kind": ["execute"], "action": "escalate"}]
    agent = claude_agent(claude_agent_acp, tmp_path / "claude", model_server, "auto", rules=rules)
    out = run_claude(env, home, work, agent, "make the note")
    assert out["decisions"] == [f"reject once: {command} (no answer: rejected)"]
    assert not (work / "made.txt").exists()
    assert out["answer"].strip() == "The Bash call was refused."


def test_agents_list_shows_claude_in_the_mode_that_asks(
    claude_agent_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    agent = claude_agent(claude_agent_acp, tmp_path / "claude", model_server, "read-only")
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    listed = raven("agents", "list", "--json", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (shown,) = json.loads(listed.stdout)
    assert shown["status"] == "ready" and shown["mode"] == "default"
    assert shown["agentName"] == "@agentclientprotocol/claude-agent-acp"
    assert shown["agentVersion"] == "0.101.0"


def test_read_only_refuses_claudes_command_and_an_escalate_rule_sees_its_write(
    claude_agent_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    """The other two of edit and command, each policy: nothing runs, nothing is written."""
    work = tmp_path / "work"
    work.mkdir()
    command = "echo hi > made.txt"
    model_server.queue(*[the_model("Bash", {"command": command, "description": "note"})] * REQUESTS)
    agent = claude_agent(claude_agent_acp, tmp_path / "claude", model_server, "read-only")
    out = run_claude(env, home, work, agent, "make the note")
    assert out["decisions"] == [f"reject once: {command} (by read-only)"]
    assert not (work / "made.txt").exists()
    note = work / "note.txt"
    model_server.replies.clear()  # what the first run left unasked
    model_server.queue(*[the_model("Write", {"file_path": str(note), "content": "hi"})] * REQUESTS)
    rules = [{"kind": ["edit"], "action": "escalate"}]
    agent = claude_agent(claude_agent_acp, tmp_path / "claude-2", model_server, "auto", rules=rules)
    out = run_claude(env, home, work, agent, "write note.txt")
    assert out["decisions"] == ["reject once: Write note.txt (no answer: rejected)"]
    assert not note.exists()

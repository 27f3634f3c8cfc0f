"""The real gemini-cli (pinned, from npm) driven by Raven offline as `gemini --acp`, as
installed: its model API is a loopback fake of Gemini's, its home a fresh folder (so it
trusts no folder), and Raven launched as a user does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import raven, write_config
from tests.fakes.model_server import FakeModelServer, Reply, gemini_stream
from tests.npm import npm_install

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes

GEMINI_CLI = "@google/gemini-cli@0.61.0"
REQUESTS = 12
"""Replies queued per run: gemini's routing call, its turn's calls, its side requests."""


@pytest.fixture(scope="module")
def gemini(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_install(tmp_path_factory, GEMINI_CLI) / "node_modules" / ".bin" / "gemini"


def gemini_agent(
    command: Path, home: Path, model: FakeModelServer, permissions: str, **env: str
) -> dict[str, Any]:
    """An agents entry for `gemini --acp` with its own home, talking to `model` only."""
    home.mkdir()
    return {
        "name": "gemini",
        "command": str(command),
        "args": ["--acp"],
        "env": {
            "GOOGLE_GEMINI_BASE_URL": model.url,
            "GEMINI_API_KEY": "fake-gemini-key",
            "GEMINI_CLI_HOME": str(home),
            **env,
        },
        "permissions": permissions,
    }


def writes(*paths: Path) -> Callable[[dict[str, Any]], Reply]:
    """Gemini's model: in the agent's turn (its tools offered) it writes each file in turn,
    then says how the last write went; gemini's routing call gets its choice."""

    def reply(body: dict[str, Any]) -> Reply:
        tools = {d["name"] for t in body.get("tools", []) for d in t["functionDeclarations"]}
        if "write_file" not in tools:
            return Reply(events=gemini_stream('{"reasoning": "simple", "model_choice": "flash"}'))
        answered = [
            part["functionResponse"]["response"]
            for content in body["contents"]
            for part in content["parts"]
            if "functionResponse" in part
        ]
        if len(answered) < len(paths):
            args = {"file_path": str(paths[len(answered)]), "content": "hi"}
            return Reply(events=gemini_stream(call=("write_file", args)))
        return Reply(events=gemini_stream(f"Last write: {json.dumps(answered[-1])}"))

    return reply


def run_gemini(
    env: dict[str, str], home: Path, work: Path, agent: dict[str, Any]
) -> dict[str, Any]:
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    ran = raven("agents", "run", "gemini", "write the notes", "--json", env=env, cwd=work)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return json.loads(ran.stdout)


def test_gemini_in_a_folder_it_does_not_trust_writes_what_auto_allows(
    gemini: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """gemini's "allow always" is a switch to autoEdit, which it refuses in a folder it does
    not trust, failing the write: Raven grants it once."""
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    model_server.queue(*[writes(note)] * REQUESTS)
    agent = gemini_agent(gemini, tmp_path / "gemini", model_server, "auto")
    out = run_gemini(env, home, work, agent)
    assert out["decisions"] == ["allow once: Writing to note.txt (by auto)"]
    assert note.read_text() == "hi"
    assert "error" not in out["answer"]


def test_gemini_where_it_trusts_the_folder_keeps_asking_for_every_edit(
    gemini: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """An "always" would have put gemini in autoEdit, and its second write would not have
    reached Raven."""
    work = tmp_path / "work"
    work.mkdir()
    first, second = work / "one.txt", work / "two.txt"
    model_server.queue(*[writes(first, second)] * REQUESTS)
    trusted = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
    agent = gemini_agent(gemini, tmp_path / "gemini", model_server, "auto", **trusted)
    out = run_gemini(env, home, work, agent)
    assert out["decisions"] == [
        "allow once: Writing to one.txt (by auto)",
        "allow once: Writing to two.txt (by auto)",
    ]
    assert first.read_text() == second.read_text() == "hi"


def test_read_only_refuses_gemini_its_write(
    gemini: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    model_server.queue(*[writes(note)] * REQUESTS)
    agent = gemini_agent(gemini, tmp_path / "gemini", model_server, "read-only")
    out = run_gemini(env, home, work, agent)
    assert out["decisions"] == ["reject once: Writing to note.txt (by read-only)"]
    assert not note.exists()
    keys = {r.headers.get("x-goog-api-key") for r in model_server.requests}
    assert keys == {"fake-gemini-key"}  # the entry's key, to the entry's base URL only


def test_an_escalate_rule_sees_geminis_write_under_auto(
    gemini: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """Nobody answers `raven agents run` here (no terminal): the escalated write is refused,
    and the decision says so."""
    work = tmp_path / "work"
    work.mkdir()
    note = work / "note.txt"
    model_server.queue(*[writes(note)] * REQUESTS)
    agent = gemini_agent(gemini, tmp_path / "gemini", model_server, "auto")
    agent["rules"] = [{"kind": ["edit"], "paths": "inside", "action": "escalate"}]
    out = run_gemini(env, home, work, agent)
    assert out["decisions"] == ["reject once: Writing to note.txt (no answer: rejected)"]
    assert not note.exists()


def runs(command: str) -> Callable[[dict[str, Any]], Reply]:
    """Gemini's model: in the agent's turn it runs `command`, then says how it went."""

    def reply(body: dict[str, Any]) -> Reply:
        tools = {d["name"] for t in body.get("tools", []) for d in t["functionDeclarations"]}
        if "run_shell_command" not in tools:
            return Reply(events=gemini_stream('{"reasoning": "simple", "model_choice": "flash"}'))
        if any("functionResponse" in part for c in body["contents"] for part in c["parts"]):
            return Reply(events=gemini_stream("The command did not run."))
        return Reply(events=gemini_stream(call=("run_shell_command", {"command": command})))

    return reply


@pytest.mark.parametrize(
    ("permissions", "rules", "by"),
    [("read-only", [], "by read-only"), ("auto", [{"kind": ["execute"], "action": "escalate"}],
                                         "no answer: rejected")],
)  # fmt: skip
def test_read_only_and_an_escalate_rule_see_geminis_command(
    gemini: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path,
    permissions: str, rules: list[dict[str, Any]], by: str,
) -> None:  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    command = "echo hi > made.txt"
    model_server.queue(*[runs(command)] * REQUESTS)
    agent = {**gemini_agent(gemini, tmp_path / "gemini", model_server, permissions), "rules": rules}
    out = run_gemini(env, home, work, agent)
    assert out["decisions"] == [f"reject once: {command} ({by})"]
    assert not (work / "made.txt").exists()

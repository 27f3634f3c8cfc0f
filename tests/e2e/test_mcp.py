"""MCP servers through the commands people run: `raven run`, `raven mcp`, and `raven acp`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import acp

from tests.acp_schema import AcpSchema
from tests.conftest import raven, write_config
from tests.e2e.acp_harness import RavenAcp
from tests.mcp.conftest import SERVER


def server_entry(name: str = "notes", *flags: str) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(SERVER), *flags]}


def test_raven_run_calls_an_mcp_tool_in_a_full_turn(env: dict[str, str], home: Path) -> None:
    (home / "script.json").write_text(
        json.dumps(
            [
                {"toolCalls": [{"name": "notes__read_note", "arguments": {"name": "groceries"}}]},
                {"text": "done"},
            ]
        )
    )
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "mcpServers": [server_entry(), server_entry("broken", "--crash")],
        },
    )
    result = raven("run", "--yes", "what do I need?", env=env)
    assert result.returncode == 0, result.stderr
    assert "notes: read_note" in result.stderr
    assert "MCP server broken" in result.stderr and "left out" in result.stderr
    shown = json.loads(
        raven(
            "sessions", "show", result.stderr.split("session ")[1].split()[0], "--json", env=env
        ).stdout
    )
    results = [m for m in shown["messages"] if m["role"] == "tool"]
    assert results[0]["content"] == "eggs, milk"


def test_mcp_list_and_test(env: dict[str, str], home: Path) -> None:
    write_config(home, {"mcpServers": [server_entry(), server_entry("broken", "--crash")]})
    listed = raven("mcp", "list", env={**env, "COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    assert "notes__read_note" in listed.stdout and "read_note" in listed.stdout
    assert "broken" in listed.stdout and "failed" in listed.stdout
    good = raven("mcp", "test", "notes", env={**env, "COLUMNS": "200"})
    assert good.returncode == 0 and "notes__add" in good.stdout
    bad = raven("mcp", "test", "broken", env={**env, "COLUMNS": "200"})
    assert bad.returncode == 1
    unknown = raven("mcp", "test", "ghost", env=env)
    assert unknown.returncode == 2 and "no MCP server 'ghost'" in unknown.stderr


def test_mcp_disabled_servers_are_listed_never_started_and_failures_count(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    off = {
        "name": "off",
        "command": "sh",
        "args": ["-c", f"touch {started}"],
        "enabled": False,
    }
    write_config(home, {"mcpServers": [server_entry("broken", "--crash"), off]})
    listed = raven("mcp", "list", env={**env, "COLUMNS": "200"})
    assert listed.returncode == 1
    assert "off" in listed.stdout and "disabled" in listed.stdout
    assert (listed.stdout + listed.stderr).count("failed to start") == 1
    tested = raven("mcp", "test", "off", env=env)
    assert tested.returncode == 2 and "disabled" in tested.stderr
    assert not started.exists()


async def test_acp_per_session_servers_are_isolated_and_released(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    (home / "script.json").write_text(
        json.dumps(
            [
                {"toolCalls": [{"name": "editor_notes__read_note", "arguments": {"name": "todo"}}]},
                {"text": "A done"},
                {"toolCalls": [{"name": "editor_notes__read_note", "arguments": {"name": "todo"}}]},
                {"text": "B done"},
            ]
        )
    )
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "modes": [{"id": "auto", "name": "Auto", "approvals": "auto"}],
        },
    )
    agent = await RavenAcp.start(env)
    try:
        await agent.initialize()
        stdio = acp.schema.McpServerStdio(
            name="editor notes",
            command=sys.executable,
            args=[str(SERVER)],
            env=[acp.schema.EnvVariable(name="NOTES_TOKEN", value="from-editor")],
        )
        http = acp.schema.HttpMcpServer(
            type="http", name="web", url="http://127.0.0.1:9/mcp", headers=[]
        )
        a = (await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[stdio, http])).session_id
        b = (await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        await agent.conn.prompt(session_id=a, prompt=[acp.text_block("A")])
        await agent.conn.prompt(session_id=b, prompt=[acp.text_block("B")])
        outputs = {
            sid: [
                c.content.text
                for u in agent.editor.of("tool_call_update", sid)
                for c in (u.content or [])
                if c.type == "content"
            ]
            for sid in (a, b)
        }
        assert outputs[a] == ["write tests"]
        assert outputs[b] and "Unknown tool 'editor_notes__read_note'" in outputs[b][0]
        await agent.conn.close_session(session_id=a)
    finally:
        assert await agent.close() == 0
        agent.check_frames(acp_schema)
        agent.kill()
    assert b"transport is not offered" in agent.stderr


async def test_acp_resume_replaces_the_session_servers(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    import re

    from tests.processes import alive

    (home / "script.json").write_text(
        json.dumps(
            [
                {"toolCalls": [{"name": "first__whoami", "arguments": {}}]},
                {"text": "one"},
                {"toolCalls": [{"name": "second__whoami", "arguments": {}}]},
                {"text": "two"},
            ]
        )
    )
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "modes": [{"id": "auto", "name": "Auto", "approvals": "auto"}],
        },
    )

    def server(name: str) -> acp.schema.McpServerStdio:
        return acp.schema.McpServerStdio(
            name=name, command=sys.executable, args=[str(SERVER)], env=[]
        )

    agent = await RavenAcp.start(env)
    try:
        await agent.initialize()
        sid = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[server("first")])
        sid = sid.session_id
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("one")])
        await agent.conn.resume_session(
            cwd=str(tmp_path), session_id=sid, mcp_servers=[server("second")]
        )
        await agent.conn.prompt(session_id=sid, prompt=[acp.text_block("two")])
        outputs = [
            c.content.text
            for u in agent.editor.of("tool_call_update", sid)
            for c in (u.content or [])
            if c.type == "content"
        ]
        first_pid = int(re.search(r"pid=(\d+)", outputs[0]).group(1))  # type: ignore[union-attr]
        assert "pid=" in outputs[1] and not alive(first_pid)
    finally:
        assert await agent.close() == 0
        agent.check_frames(acp_schema)
        agent.kill()

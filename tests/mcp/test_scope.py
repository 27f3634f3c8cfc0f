"""The MCP scope against real MCP servers written with the official SDK."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from raven.config import Limits, ToolFilter
from raven.mcp import McpScope
from raven.mcp.tools import PassThroughArgs, ReadResourceArgs
from raven.sandbox import Sandbox, kernel_version
from raven.tools import Question, ToolContext, ToolError
from tests.mcp.conftest import stdio_spec
from tests.processes import alive

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes


async def _no(question: Question) -> str | None:
    return None


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path, limits=Limits(command_timeout_s=10), ask=_no)


async def run(tool: object, tmp_path: Path, **args: object) -> object:
    return await tool.run(PassThroughArgs(**args), ctx(tmp_path))  # type: ignore[attr-defined]


async def test_stdio_tools_are_offered_under_scoped_names_and_called(
    tmp_path: Path,
) -> None:
    scope = McpScope([stdio_spec()], tmp_path / "logs")
    try:
        tools, notices = await scope.tools()
        by_name = {t.name: t for t in tools}
        assert notices == []
        assert {"notes__read_note", "notes__add", "notes__whoami", "read_resource"} <= set(by_name)
        assert by_name["notes__add"].parameters()["required"] == ["a", "b"]
        assert by_name["notes__add"].kind == "other" and by_name["notes__add"].needs_approval
        out = await run(by_name["notes__read_note"], tmp_path, name="todo")
        assert out.text == "write tests" and not out.is_error  # type: ignore[attr-defined]
        structured = await run(by_name["notes__add"], tmp_path, a=2, b=3)
        assert '"sum": 5' in structured.text  # type: ignore[attr-defined]
        failed = await run(by_name["notes__read_note"], tmp_path, name="nope")
        assert failed.is_error  # type: ignore[attr-defined]
        picture = await run(by_name["notes__picture"], tmp_path)
        assert picture.images[0].mime_type == "image/png"  # type: ignore[attr-defined]
        resource = await by_name["read_resource"].run(
            ReadResourceArgs(server="notes", uri="notes://groceries"), ctx(tmp_path)
        )
        assert resource.text == "eggs, milk"
    finally:
        await scope.aclose()


async def test_streamable_http_server(http_server: object, tmp_path: Path) -> None:
    scope = McpScope([http_server], tmp_path)  # type: ignore[list-item]
    try:
        tools, notices = await scope.tools()
        assert notices == []
        tool = next(t for t in tools if t.name == "remote__read_note")
        assert (await run(tool, tmp_path, name="groceries")).text == "eggs, milk"  # type: ignore[attr-defined]
    finally:
        await scope.aclose()


async def test_tool_filters_and_disabled_servers(tmp_path: Path) -> None:
    scope = McpScope(
        [
            stdio_spec(tools=ToolFilter(allow=["read_*", "add"], deny=["add"])),
            stdio_spec("off", enabled=False),
        ],
        tmp_path,
    )
    try:
        tools, _ = await scope.tools()
        assert [t.name for t in tools if t.name != "read_resource"] == ["notes__read_note"]
    finally:
        await scope.aclose()


async def test_a_crashing_server_is_reported_once_and_others_go_on(tmp_path: Path) -> None:
    scope = McpScope([stdio_spec("broken", "--crash"), stdio_spec()], tmp_path)
    try:
        tools, notices = await scope.tools()
        assert any(t.name == "notes__read_note" for t in tools)
        assert len(notices) == 1 and "broken" in notices[0] and "left out" in notices[0]
        assert (await scope.tools())[1] == []
        assert "refusing to start" in (tmp_path / "mcp.log").read_text()
    finally:
        await scope.aclose()


async def test_a_hanging_handshake_times_out(tmp_path: Path) -> None:
    scope = McpScope([stdio_spec("stuck", "--hang", timeout_s=1.0), stdio_spec()], tmp_path)
    started = time.monotonic()
    try:
        tools, notices = await scope.tools()
        assert time.monotonic() - started < 8
        assert "within 1s" in notices[0]
        assert any(t.name == "notes__add" for t in tools)
    finally:
        await scope.aclose()


async def test_a_server_killed_mid_session_fails_its_calls_and_is_left_out(
    tmp_path: Path,
) -> None:
    scope = McpScope([stdio_spec()], tmp_path)
    try:
        tools, _ = await scope.tools()
        whoami = next(t for t in tools if t.name == "notes__whoami")
        pid = int(re.search(r"pid=(\d+)", (await run(whoami, tmp_path)).text).group(1))  # type: ignore[attr-defined, union-attr]
        os.kill(pid, signal.SIGKILL)
        read = next(t for t in tools if t.name == "notes__read_note")
        try:
            await run(read, tmp_path, name="todo")
            raise AssertionError("the call should fail")
        except ToolError as exc:
            assert "notes" in str(exc)
        tools, notices = await scope.tools()
        assert not any(t.name.startswith("notes__") for t in tools)
        assert len(notices) == 1 and "notes" in notices[0]
    finally:
        await scope.aclose()


async def test_closing_the_scope_leaves_no_child_process(tmp_path: Path) -> None:
    scope = McpScope([stdio_spec(env={"NOTES_TOKEN": "t-1"})], tmp_path)
    tools, _ = await scope.tools()
    whoami = next(t for t in tools if t.name == "notes__whoami")
    text = (await run(whoami, tmp_path)).text  # type: ignore[attr-defined]
    assert "token=t-1" in text
    pid = int(re.search(r"pid=(\d+)", text).group(1))  # type: ignore[union-attr]
    await scope.aclose()
    assert not alive(pid)


@pytest.mark.skipif(kernel_version() < 1, reason="this kernel has no Landlock")
async def test_a_stdio_server_in_the_sandbox_keeps_to_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, work, outside = tmp_path / "user", tmp_path / "work", tmp_path / "outside"
    for folder in (user / ".ssh", work, outside):
        folder.mkdir(parents=True)
    (user / ".ssh" / "id_ed25519").write_text("planted-key")
    monkeypatch.setenv("HOME", str(user))
    spec = stdio_spec(cwd=str(work), sandbox="workspace", env={"NOTES_TOKEN": "its-own"})
    scope = McpScope([spec], tmp_path / "logs", Sandbox())
    try:
        tools = {t.name: t for t in (await scope.tools())[0]}
        wrote = await run(tools["notes__save_text"], tmp_path, path="inside.txt", text="in")
        assert not wrote.is_error and (work / "inside.txt").read_text() == "in"  # type: ignore[attr-defined]
        refused = await run(
            tools["notes__save_text"], tmp_path, path=str(outside / "x"), text="out"
        )
        assert refused.is_error and not (outside / "x").exists()  # type: ignore[attr-defined]
        secret = await run(
            tools["notes__load_text"], tmp_path, path=str(user / ".ssh" / "id_ed25519")
        )
        assert secret.is_error and "planted-key" not in secret.text  # type: ignore[attr-defined]
        # Its own env reaches it.
        who = await run(tools["notes__whoami"], tmp_path)
        assert "token=its-own" in who.text  # type: ignore[attr-defined]
    finally:
        await scope.aclose()


async def test_a_stdio_server_whose_sandbox_cannot_be_held_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAVEN_SANDBOX_ABI", "0")
    kernel_version.cache_clear()
    scope = McpScope([stdio_spec(sandbox="strict")], tmp_path / "logs", Sandbox())
    try:
        tools, notices = await scope.tools()
        assert not [t for t in tools if t.name.startswith("notes__")]
        (notice,) = notices
        assert "was not started: it requires the strict sandbox" in notice, notice
    finally:
        await scope.aclose()
        monkeypatch.delenv("RAVEN_SANDBOX_ABI")
        kernel_version.cache_clear()

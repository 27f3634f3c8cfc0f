"""The broker's MCP server as an MCP client starts it: the official SDK's client over
real pipes, against a real broker on its channel."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from raven.broker.broker import Broker
from raven.broker.channel import Channel
from raven.broker.entry import SERVER_MODULE, broker_entry, server_entry
from raven.broker.tool import mcp_tool
from raven.config import AgentSpec, BrokerConfig, Paths, SessionsConfig
from raven.sessions import open_sessions
from tests.broker.test_broker import Host

TOOL_FILE = Path(__file__).parents[2] / "raven" / "broker" / "a2a_tool.json"


def test_the_servers_tool_is_generated_from_the_tool_the_model_is_given() -> None:
    assert json.loads(TOOL_FILE.read_text()) == mcp_tool(), (
        "generated from raven.broker.tool: run `uv run python -m raven.compose.generated`"
    )


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[Broker, str]]:
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    store = open_sessions(SessionsConfig(), paths)
    agents = [AgentSpec(name="ann", command="x"), AgentSpec(name="bob", command="x")]
    served = Broker(store, agents, BrokerConfig(), Host())
    channel = Channel(served)
    try:
        yield served, await channel.open()
    finally:
        await channel.aclose()
        await store.aclose()


def params(socket: str, token: str) -> StdioServerParameters:
    entry = server_entry(socket, token)
    assert entry["args"] == ["-m", SERVER_MODULE] and broker_entry(entry) == (socket, token)
    env = {e["name"]: e["value"] for e in entry["env"]}
    return StdioServerParameters(command=sys.executable, args=entry["args"], env=env)


async def test_an_mcp_client_lists_the_tool_and_calls_the_broker_with_it(
    broker: tuple[Broker, str],
) -> None:
    served, socket = broker
    async with (
        stdio_client(params(socket, served.mint("s1", "ann"))) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        (tool,) = (await session.list_tools()).tools
        assert tool.name == "a2a" and tool.input_schema["required"] == ["action"]
        found = await session.call_tool("a2a", {"action": "discover"})
        assert not found.is_error
        assert json.loads(found.content[0].text) == {"agents": [{"name": "bob", "description": ""}]}
        sent = await session.call_tool(
            "a2a", {"action": "send", "to": "bob", "text": "hi", "timeout_s": 0}
        )
        assert json.loads(sent.content[0].text)["state"] == "submitted"
        wrong = await session.call_tool("a2a", {"action": "get", "task_id": "bt_none"})
        assert wrong.is_error and wrong.content[0].text.startswith("unknown_task: ")


async def test_a_forged_token_is_refused_with_its_code(
    broker: tuple[Broker, str],
) -> None:
    _, socket = broker
    async with (
        stdio_client(params(socket, "forged")) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        refused = await session.call_tool("a2a", {"action": "discover"})
        assert refused.is_error and refused.content[0].text.startswith("unknown_token: ")


@pytest.mark.parametrize("level", ["workspace", "strict"])
async def test_a_child_in_ravens_sandbox_reaches_the_broker(
    broker: tuple[Broker, str], tmp_path: Path, level: str
) -> None:
    """The channel is a socket file outside the child's working directory; the sandbox
    (and `strict`'s network namespace) leaves it reachable, as the broker is meant to be."""
    from raven.sandbox import kernel_version

    if kernel_version() < 1:
        pytest.skip("this kernel has no Landlock: nothing to hold the sandbox")
    served, socket = broker
    token = served.mint("s1", "ann")
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    client = (
        "import asyncio, json; from raven.broker.channel import ask; "
        f"print(json.dumps(asyncio.run(ask({socket!r}, {token!r}, 'discover', {{}}))))"
    )
    jailed = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "raven.sandbox", "--level", level],
        *["--cwd", str(work), "--temp", str(temp), "--", sys.executable, "-c", client],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(jailed.communicate(), 30)
    assert jailed.returncode == 0, err.decode()
    assert json.loads(out) == {"agents": [{"name": "bob", "description": ""}]}

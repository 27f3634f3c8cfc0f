"""The aiohttp binding mounted on an app of the test's own, as the gateway will mount it."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import weakref
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from raven.a2a import add_a2a_routes, build_mounts
from raven.config import Paths, RavenConfig
from raven.engine import Runtime

TOKEN = "routes-test-token"


async def serve_routes(
    tmp_path: Path, steps: list[dict[str, Any]] | None = None, **extra: Any
) -> tuple[TestClient, Any, Runtime]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps or []))
    server = {"token": TOKEN, **extra.pop("server", {})}
    config = RavenConfig.model_validate(
        {
            "models": [{"id": "s", "provider": "scripted", "script": str(script)}],
            "a2a": {"server": server},
            **extra,
        }
    )
    runtime = Runtime(config, Paths(tmp_path / "config.json", tmp_path / "data"), face="a2a")
    (mount,) = build_mounts(runtime, config.a2a.server, env={})
    app = web.Application()
    add_a2a_routes(app, [mount])
    test_client = TestClient(TestServer(app))
    await test_client.start_server()
    return test_client, mount, runtime


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[TestClient]:
    test_client, mount, runtime = await serve_routes(tmp_path)
    yield test_client
    await test_client.close()
    await mount.aclose()
    await runtime.aclose()


async def test_long_streams_get_keepalive_comments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("raven.a2a.routes.KEEPALIVE_S", 0.1)
    # The model says nothing until the test has seen the keepalives and opens the gate.
    client, mount, runtime = await serve_routes(tmp_path, [{"text": "done", "waitFor": "gate"}])
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "slow"}]}},
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
    try:
        response = await client.post("/a2a", json=body, headers=headers)
        assert response.headers["Content-Type"].startswith("text/event-stream")
        raw = ""
        async with asyncio.timeout(10):
            while raw.count(": ping\n\n") < 2:
                raw += (await response.content.readany()).decode()
        (tmp_path / "gate").touch()
        raw += (await response.read()).decode()
    finally:
        await client.close()
        await mount.aclose()
        await runtime.aclose()
    last = [line for line in raw.splitlines() if line.startswith("data: ")][-1]
    final = json.loads(last[6:])["result"]["statusUpdate"]["status"]
    assert final["state"] == "TASK_STATE_COMPLETED"


async def test_the_card_honours_etags(client: TestClient) -> None:
    first = await client.get("/.well-known/agent-card.json")
    etag = first.headers["ETag"]
    again = await client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert first.status == 200 and again.status == 304
    assert parsedate_to_datetime(first.headers["Last-Modified"]) <= datetime.now(UTC)


async def test_mounting_refuses_inside_a_sub_agent(tmp_path: Path) -> None:
    from raven.a2a import SubagentRefused

    config = RavenConfig.model_validate({"a2a": {"server": {"token": TOKEN}}})
    runtime = Runtime(config, Paths(tmp_path / "config.json", tmp_path / "data"), face="a2a")
    with pytest.raises(SubagentRefused):
        build_mounts(runtime, config.a2a.server, env={"RAVEN_SUBAGENT": "1"})
    await runtime.aclose()


AUTH = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}


@pytest.mark.parametrize("public_url", [None, "https://raven.example.com/"])
async def test_the_cards_never_reflect_the_host_header(
    tmp_path: Path, public_url: str | None
) -> None:
    roster = [{"name": "helper", "description": "a sub-agent", "command": "raven"}]
    server = {"publicUrl": public_url} if public_url else {}
    client, mount, runtime = await serve_routes(tmp_path, server=server, agents=roster)
    port = client.port
    try:
        spoofed = {"Host": "evil.example:1", "X-Forwarded-Proto": "https"}
        card = await (await client.get("/.well-known/agent-card.json", headers=spoofed)).json()
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
        extended = await (await client.post("/a2a", json=body, headers={**AUTH, **spoofed})).json()
    finally:
        await client.close()
        await mount.aclose()
        await runtime.aclose()
    expected = "https://raven.example.com/a2a" if public_url else f"http://localhost:{port}/a2a"
    assert card["supportedInterfaces"][0]["url"] == expected
    assert extended["result"]["supportedInterfaces"][0]["url"] == expected
    assert extended["result"]["capabilities"]["extensions"]


async def test_a_loopback_card_names_the_host_as_the_caller_spelled_it(tmp_path: Path) -> None:
    client, mount, runtime = await serve_routes(tmp_path)
    port = client.port
    try:
        urls = {}
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"127.0.0.2:{port}", "127.0.0.1:1"):
            response = await client.get("/.well-known/agent-card.json", headers={"Host": host})
            assert response.headers["Cache-Control"] == "max-age=300"
            urls[host] = (await response.json())["supportedInterfaces"][0]["url"]
        body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        slashed = await client.post("/a2a/", json=body, headers=AUTH)
        listed = await slashed.json()
    finally:
        await client.close()
        await mount.aclose()
        await runtime.aclose()
    assert urls == {
        f"127.0.0.1:{port}": f"http://127.0.0.1:{port}/a2a",
        f"localhost:{port}": f"http://localhost:{port}/a2a",
        f"127.0.0.2:{port}": f"http://localhost:{port}/a2a",  # not this listener's address
        "127.0.0.1:1": f"http://localhost:{port}/a2a",  # another port: not this listener's name
    }
    assert slashed.status == 200 and "tasks" in listed["result"]


async def test_the_token_is_checked_before_the_body_is_read(client: TestClient) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        malformed = await client.post("/a2a", data=b"{not json", headers=headers)
        assert malformed.status == 401
        huge = await client.post("/a2a", data=io.BytesIO(b"x" * (2 << 20)), headers=headers)
        assert huge.status == 401
    assert (await client.post("/a2a", data=b"{not json", headers=AUTH)).status == 200


async def test_a_notification_gets_no_response(client: TestClient) -> None:
    note = {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}}
    answered = await client.post("/a2a", json=note, headers=AUTH)
    assert answered.status == 204 and await answered.read() == b""
    assert (await client.post("/a2a", json=note)).status == 401


async def test_a_finished_task_lets_go_of_its_session_without_the_collector(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing of a task's turn is left in a reference cycle: once the task has ended, its
    session (transcript, event log, tools) is freed as its last reference goes, not at the
    next pass of the cyclic garbage collector, which stalls a busy server."""
    sessions: list[weakref.ref[Any]] = []
    new_session = Runtime.new_session

    async def recording(self: Runtime, *args: Any, **kwargs: Any) -> Any:
        session = await new_session(self, *args, **kwargs)
        sessions.append(weakref.ref(session))
        return session

    monkeypatch.setattr(Runtime, "new_session", recording)
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    gc.collect()
    gc.disable()
    try:
        reply = await (await client.post("/a2a", json=call, headers=AUTH)).json()
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert len(sessions) == 1
        async with asyncio.timeout(10):  # the task settles just after it answered
            while sessions[0]() is not None:
                await asyncio.sleep(0.01)
    finally:
        gc.enable()


async def test_json_rpc_errors_come_before_the_version_check(client: TestClient) -> None:
    """As the SDK's dispatcher answers (and the conformance kit's JSON-RPC tests, which send
    no A2A-Version, expect): an unknown method or params that do not parse are JSON-RPC's
    errors whatever the version; a well-formed request in another version is refused."""
    bearer = {"Authorization": AUTH["Authorization"]}

    async def code(method: str, params: dict[str, Any], headers: dict[str, str]) -> int:
        call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        reply = await (await client.post("/a2a", json=call, headers=headers)).json()
        return int(reply["error"]["code"])

    for headers in (bearer, bearer | {"A2A-Version": "0.3"}, AUTH):
        assert await code("SendMessageXXX", {}, headers) == -32601
        assert await code("SendMessage", {"message": {"parts": "invalid"}}, headers) == -32602
        assert await code("GetTask", {"id": 5, "historyLength": "many"}, headers) == -32602
    assert await code("GetTask", {"id": "no-such-task"}, bearer) == -32009
    assert await code("GetTask", {"id": "no-such-task"}, AUTH) == -32001


@pytest.mark.parametrize(
    ("kind", "params"),
    [
        (
            "SendMessageRequest",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
        ),
        ("SendMessageRequest", {"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        ("SendMessageRequest", {"message": {"messageId": "m", "role": "ROLE_USER"}}),
        ("SendMessageRequest", {"message": {"messageId": "m", "parts": [{"text": "hi"}]}}),
        ("SendMessageRequest", {}),
        (
            "SendMessageRequest",
            {
                "message": {
                    "messageId": "m",
                    "role": "ROLE_USER",
                    "parts": [{"data": {"a": [1, {"b": None}]}}, {"url": "https://x/y"}],
                    "metadata": {"k": {"z": 1}},
                },
                "configuration": {"historyLength": 2},
            },
        ),
        ("GetTaskRequest", {"id": "t"}),
        ("GetTaskRequest", {}),
        ("CancelTaskRequest", {}),
        ("ListTasksRequest", {}),
        ("TaskPushNotificationConfig", {"taskId": "t"}),
        ("TaskPushNotificationConfig", {"taskId": "t", "url": "https://x/hook"}),
    ],
)
def test_the_required_fields_check_agrees_with_the_sdks(kind: str, params: dict[str, Any]) -> None:
    from a2a import types
    from a2a.utils.errors import InvalidParamsError
    from a2a.utils.proto_utils import validate_proto_required_fields
    from google.protobuf.json_format import ParseDict

    from raven.a2a.requests import complete as _complete

    request = ParseDict(params, getattr(types, kind)())
    try:
        validate_proto_required_fields(request)
        sdk_says = True
    except InvalidParamsError:
        sdk_says = False
    assert _complete(request) is sdk_says

"""The aiohttp binding mounted on an app of the test's own, as the gateway will mount it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from raven.a2a import add_a2a_routes, build_mount
from raven.config import Paths, RavenConfig
from raven.engine import Runtime

TOKEN = "routes-test-token"


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TestClient]:
    monkeypatch.setattr("raven.a2a.routes.KEEPALIVE_S", 0.1)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "took a while", "delayMs": 450}]))
    config = RavenConfig.model_validate(
        {
            "models": [{"id": "s", "provider": "scripted", "script": str(script)}],
            "a2a": {"server": {"token": TOKEN}},
        }
    )
    runtime = Runtime(config, Paths(tmp_path / "config.json", tmp_path / "data"), face="a2a")
    mount = build_mount(runtime, config.a2a.server, env={})
    app = web.Application()
    add_a2a_routes(app, mount)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client
    await mount.aclose()
    await runtime.aclose()


async def test_long_streams_get_keepalive_comments(client: TestClient) -> None:
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "slow"}]}},
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
    response = await client.post("/a2a", json=body, headers=headers)
    raw = (await response.read()).decode()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert raw.count(": ping\n\n") >= 2
    last = [line for line in raw.splitlines() if line.startswith("data: ")][-1]
    final = json.loads(last[6:])["result"]["statusUpdate"]["status"]
    assert final["state"] == "TASK_STATE_COMPLETED"


async def test_the_card_honours_etags(client: TestClient) -> None:
    first = await client.get("/.well-known/agent-card.json")
    etag = first.headers["ETag"]
    again = await client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert first.status == 200 and again.status == 304


async def test_mounting_refuses_inside_a_sub_agent(tmp_path: Path) -> None:
    from raven.a2a import SubagentRefused

    config = RavenConfig.model_validate({"a2a": {"server": {"token": TOKEN}}})
    runtime = Runtime(config, Paths(tmp_path / "config.json", tmp_path / "data"), face="a2a")
    with pytest.raises(SubagentRefused):
        build_mount(runtime, config.a2a.server, env={"RAVEN_SUBAGENT": "1"})
    await runtime.aclose()

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic_core import to_json

from raven.jsonrpc import Connection, ConnectionClosed, FrameReader, RpcError
from raven.jsonrpc.connection import std_dumps


class Echo:
    def __init__(self) -> None:
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.release = asyncio.Event()

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "boom":
            raise ValueError("secret internals")
        if method == "fail":
            raise RpcError(-32002, "nope", {"k": 1})
        if method == "wait":
            await self.release.wait()
        if method == "unsendable":
            return {"what": object()}
        return {"method": method, "params": params}

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))


class Pipe:
    def __init__(self) -> None:
        self.inbound = asyncio.StreamReader()
        self.written: list[dict[str, Any]] = []
        self.got = asyncio.Condition()

    async def write(self, data: bytes) -> None:
        async with self.got:
            self.written.append(json.loads(data))
            self.got.notify_all()

    def feed(self, message: Any) -> None:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.inbound.feed_data(raw + b"\n")

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        async with self.got:
            await asyncio.wait_for(self.got.wait_for(lambda: len(self.written) >= count), 5)
        return self.written


@pytest.fixture
async def wired() -> Any:
    pipe, handler = Pipe(), Echo()
    conn = Connection(FrameReader(pipe.inbound), pipe.write, handler)
    serving = asyncio.create_task(conn.serve())
    yield pipe, handler, conn
    pipe.inbound.feed_eof()
    await serving
    await conn.finish(1)


async def test_requests_are_answered_once_and_notifications_never(wired: Any) -> None:
    pipe, handler, _ = wired
    pipe.feed({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"a": 1}})
    pipe.feed({"jsonrpc": "2.0", "method": "note", "params": {"b": 2}})
    pipe.feed({"jsonrpc": "2.0", "id": "s", "method": "fail"})
    pipe.feed({"jsonrpc": "2.0", "id": 3, "method": "boom", "params": {}})
    written = await pipe.wait_for(3)
    async with asyncio.timeout(5):
        while not handler.notes:  # the notification is handled, and never answered
            await asyncio.sleep(0)
    by_id = {m["id"]: m for m in written}
    assert len(written) == 3
    assert by_id[1]["result"] == {"method": "hello", "params": {"a": 1}}
    assert by_id["s"]["error"] == {"code": -32002, "message": "nope", "data": {"k": 1}}
    assert by_id[3]["error"] == {"code": -32603, "message": "Internal error"}
    assert handler.notes == [("note", {"b": 2})]


@pytest.mark.parametrize("dumps", [std_dumps, to_json], ids=["json", "pydantic_core"])
async def test_a_result_that_is_not_json_is_answered_internal_error_and_serving_goes_on(
    dumps: Any,
) -> None:
    pipe, handler = Pipe(), Echo()
    conn = Connection(FrameReader(pipe.inbound), pipe.write, handler, dumps=dumps)
    serving = asyncio.create_task(conn.serve())
    pipe.feed({"jsonrpc": "2.0", "id": 1, "method": "unsendable"})
    pipe.feed({"jsonrpc": "2.0", "id": 2, "method": "hello"})
    written = {m["id"]: m for m in await pipe.wait_for(2)}
    assert written[1]["error"] == {"code": -32603, "message": "Internal error"}
    assert written[2]["result"] == {"method": "hello", "params": {}}
    pipe.inbound.feed_eof()
    await serving
    await conn.finish(1)


async def test_a_slow_request_does_not_block_others(wired: Any) -> None:
    pipe, handler, _ = wired
    pipe.feed({"jsonrpc": "2.0", "id": 1, "method": "wait"})
    pipe.feed({"jsonrpc": "2.0", "id": 2, "method": "quick"})
    first = await pipe.wait_for(1)
    assert first[0]["id"] == 2
    handler.release.set()
    assert (await pipe.wait_for(2))[1]["id"] == 1


@pytest.mark.parametrize(
    "frame, code",
    [
        (b"[]", -32600),
        (b"{oops", -32700),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"x"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":"str"}', -32602),
        (b'{"jsonrpc":"aaa","method":"x"}', -32600),
        (b'{"jsonrpc":"2.0"}', -32600),
        (b"[" * 50_000, -32700),
    ],
)
async def test_malformed_frames_get_the_right_error(wired: Any, frame: bytes, code: int) -> None:
    pipe, _, _ = wired
    pipe.feed(frame)
    assert (await pipe.wait_for(1))[0]["error"]["code"] == code


async def test_outbound_requests_match_responses_and_time_out(wired: Any) -> None:
    pipe, _, conn = wired
    asking = asyncio.create_task(conn.request("ask", {"q": 1}, timeout_s=5))
    (sent,) = await pipe.wait_for(1)
    pipe.feed({"jsonrpc": "2.0", "id": sent["id"], "result": {"answer": 42}})
    assert await asking == {"answer": 42}
    failing = asyncio.create_task(conn.request("ask", {}, timeout_s=5))
    sent = (await pipe.wait_for(2))[1]
    pipe.feed({"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -1, "message": "no"}})
    with pytest.raises(RpcError, match="no"):
        await failing
    with pytest.raises(TimeoutError):
        await conn.request("ask", {}, timeout_s=0.05)
    cancel = (await pipe.wait_for(4))[3]
    assert cancel["method"] == "$/cancel_request"


async def test_pending_requests_fail_when_the_peer_goes_away() -> None:
    pipe = Pipe()
    conn = Connection(FrameReader(pipe.inbound), pipe.write, Echo())
    serving = asyncio.create_task(conn.serve())
    asking = asyncio.create_task(conn.request("ask", {}, timeout_s=5))
    await pipe.wait_for(1)
    pipe.inbound.feed_eof()
    await serving
    with pytest.raises(ConnectionClosed):
        await asking
    await conn.finish(1)


async def test_the_outbound_pass_sees_every_frame_written() -> None:
    pipe, handler = Pipe(), Echo()

    def mark(message: dict[str, Any]) -> dict[str, Any]:
        return {**message, "marked": True}

    conn = Connection(FrameReader(pipe.inbound), pipe.write, handler, outbound=mark)
    serving = asyncio.create_task(conn.serve())
    conn.notify("note", {})
    asked = asyncio.create_task(conn.request("ask", {}, 5))
    pipe.feed({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}})
    pipe.feed({"jsonrpc": "2.0", "id": 2, "method": "fail", "params": {}})
    written = await pipe.wait_for(4)
    pipe.feed({"jsonrpc": "2.0", "id": written[1]["id"], "result": {}})
    await asked
    pipe.inbound.feed_eof()
    await serving
    await conn.finish(1)
    assert len(written) == 4 and all(m["marked"] for m in written)
    assert {"method" in m or "result" in m or "error" in m for m in written} == {True}

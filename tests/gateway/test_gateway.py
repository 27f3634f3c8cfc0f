"""The gateway over real WebSockets on loopback: the contract both ways, a turn streamed with
an approval answered, two UIs on one session, and who is let in."""

from __future__ import annotations

import asyncio
import gc
import json
import re
import socket
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jsonschema
import pytest
from aiohttp.test_utils import TestServer

from raven.config import Paths, RavenConfig
from raven.engine import Runtime
from raven.engine.codec import events_schema
from raven.gateway.app import HUB, SOCKETS, make_app
from raven.gateway.auth import COOKIE, LOGIN_LINK_TTL_S, Gatekeeper
from raven.gateway.rpc import STALL_S, Peer
from raven.rpc.contract import METHODS, NOTIFICATIONS, openrpc_document
from raven.sandbox import enforcement
from tests.ports import free_port

TOKEN = "gateway-test-token-0123456789"
DOCUMENT = Path(__file__).parents[2] / "rpc-schema" / "openrpc.json"
REGENERATE = "generated from the code: run `uv run python -m raven.compose.generated`"
DEADLINE_S = 10


def test_the_committed_document_is_the_one_the_code_builds() -> None:
    assert json.loads(DOCUMENT.read_text()) == openrpc_document(events_schema()), REGENERATE


def test_every_declared_method_is_served_and_every_served_method_declared() -> None:
    namespaces = {name.split(".")[0] for name in METHODS}
    served = {
        name[1:].replace("_", ".", 1)
        for name in vars(Peer)
        if name.startswith("_")
        and not name.startswith("__")
        and name[1:].split("_")[0] in namespaces
    }
    assert served == set(METHODS)
    doc = openrpc_document(events_schema())
    assert [m["name"] for m in doc["methods"]] == list(METHODS)
    assert [n["name"] for n in doc["x-notifications"]] == list(NOTIFICATIONS)


class Gateway:
    def __init__(self, server: TestServer, gate: Gatekeeper, runtime: Runtime) -> None:
        self.server = server
        self.gate = gate
        self.runtime = runtime
        self.http = aiohttp.ClientSession()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    async def connect(self, **headers: str) -> Client:
        ws = await self.http.ws_connect(
            self.base + "/rpc", headers={"Authorization": f"Bearer {TOKEN}", **headers}
        )
        return Client(ws)


class Client:
    """A Raven RPC client that checks every frame against the document's schemas."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.notes: list[dict[str, Any]] = []
        self.replies: dict[int, dict[str, Any]] = {}
        self.unattributed: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self._ids = 0
        self._reader = asyncio.create_task(self._read())
        doc = openrpc_document(events_schema())
        components = {"components": doc["components"]}  # what the document's `$ref`s reach

        def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
            return jsonschema.Draft202012Validator({**schema, **components})

        self._results = {m["name"]: validator(m["result"]["schema"]) for m in doc["methods"]}
        self._notes = {n["name"]: validator(n["params"]) for n in doc["x-notifications"]}
        self._params = {
            m["name"]: validator(
                {
                    "type": "object",
                    "properties": {p["name"]: p["schema"] for p in m["params"]},
                    "required": [p["name"] for p in m["params"] if p["required"]],
                    "additionalProperties": False,
                }
            )
            for m in doc["methods"]
        }

    async def _read(self) -> None:
        async for message in self.ws:
            frame = json.loads(message.data)
            if "method" in frame:
                self._notes[frame["method"]].validate(frame["params"])
                self.notes.append(frame)
            elif frame["id"] is None:  # an error for a frame that had no usable id
                self.unattributed.append(frame)
            else:
                self.replies[frame["id"]] = frame
            self.arrived.set()

    async def call(self, method: str, **params: Any) -> Any:
        if method in self._params:
            self._params[method].validate(params)  # what we send is what the document says
        self._ids += 1
        request_id = self._ids
        await self.ws.send_str(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        reply = await self.until(lambda: self.replies.get(request_id))
        if "error" in reply:
            return reply["error"]
        self._results[method].validate(reply["result"])
        return reply["result"]

    async def until(self, found: Any) -> Any:
        async with asyncio.timeout(DEADLINE_S):
            while not (value := found()):
                self.arrived.clear()
                await self.arrived.wait()
        return value

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [
            n["params"]["event"]
            for n in self.notes
            if n["method"] == "session.event" and n["params"]["event"]["type"] == kind
        ]

    def note(self, method: str) -> dict[str, Any] | None:
        return next((n["params"] for n in self.notes if n["method"] == method), None)

    async def close(self) -> None:
        await self.ws.close()
        await self._reader


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Any]:
    made: list[Gateway] = []

    async def start(steps: list[dict[str, Any]], **more: Any) -> Gateway:
        (tmp_path / "script.json").write_text(json.dumps(steps))
        config = RavenConfig.model_validate(
            {
                **more,
                "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
                "modes": [
                    {"id": "ask", "name": "Ask"},
                    {"id": "auto", "name": "Auto", "approvals": "auto", "sandbox": "workspace"},
                ],
                "defaultMode": "ask",
            }
        )
        runtime = Runtime(config, Paths(tmp_path / "config.json", tmp_path / "data"), "gateway")
        port = free_port()
        gate = Gatekeeper(TOKEN, {f"127.0.0.1:{port}", f"localhost:{port}"})
        server = TestServer(make_app(runtime, gate), host="127.0.0.1", port=port)
        await server.start_server()
        made.append(Gateway(server, gate, runtime))
        return made[-1]

    yield start
    for g in made:
        await g.http.close()
        await g.server.close()
        await g.runtime.aclose()


async def test_a_turn_streams_and_an_approval_is_answered_over_rpc(
    gateway: Any, tmp_path: Path
) -> None:
    write = {"name": "write_file", "arguments": {"path": "gw.txt", "content": "via rpc"}}
    g = await gateway([{"toolCalls": [write]}, {"text": "Written."}])
    ui = await g.connect()
    hello = await ui.call("system.hello")
    assert hello["name"] == "raven"
    session = await ui.call("session.create", cwd=str(tmp_path))
    sid = session["sessionId"]
    assert (await ui.call("turn.send", sessionId=sid, text="write it"))["accepted"]
    asked = await ui.until(lambda: ui.note("permission.requested"))
    assert asked["title"] == "Write gw.txt" and "allow_once" in asked["offered"]
    await ui.call("permission.respond", requestId=asked["requestId"], decision="allow_once")
    ended = await ui.until(lambda: ui.events("TurnEnded"))
    assert ended[0]["stopReason"] == "end_turn"
    assert (tmp_path / "gw.txt").read_text() == "via rpc"
    assert "".join(e["text"] for e in ui.events("AgentText")) == "Written."
    assert ui.note("request.settled") == {"requestId": asked["requestId"]}
    again = await ui.call("permission.respond", requestId=asked["requestId"], decision="allow_once")
    assert again["code"] == -32003
    detail = await ui.call("session.get", sessionId=sid)
    assert detail["sandbox"] == ""  # `ask` runs commands outside any sandbox
    types = [e["type"] for e in detail["history"]]
    assert types[0] == "TurnStarted" and types.count("ToolCallStarted") == 1
    (spent,) = detail["usage"]["models"].values()  # two model calls, added up
    assert spent["calls"] == 2 and spent["inputTokens"] > 0 and detail["usage"]["costUsd"] is None
    assert types[-1] == "TurnEnded"  # the turn as it was shown live, to its end
    listed = await ui.call("session.list", cwd=str(tmp_path))
    assert [s["sessionId"] for s in listed["sessions"]] == [sid]
    await ui.close()


async def test_two_uis_see_one_turn_and_a_disconnect_does_not_stop_it(
    gateway: Any, tmp_path: Path
) -> None:
    g = await gateway([{"text": "slow answer", "waitFor": str(tmp_path / "gate")}])
    first, second = await g.connect(), await g.connect()
    sid = (await first.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await second.call("session.subscribe", sessionId=sid)
    await first.call("turn.send", sessionId=sid, text="go")
    await first.close()  # the UI that started it goes away
    (tmp_path / "gate").touch()  # and only then does the model answer
    ended = await second.until(lambda: second.events("TurnEnded"))
    assert ended[0]["stopReason"] == "end_turn"
    assert "".join(e["text"] for e in second.events("AgentText")) == "slow answer"
    started = [n for n in second.notes if n["method"] == "session.event"]
    assert started and started[0]["params"]["event"]["type"] == "TurnStarted"
    await second.close()


async def test_cancel_steer_errors_and_lists(gateway: Any, tmp_path: Path) -> None:
    g = await gateway([{"text": "never", "delayMs": 30_000}])
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await ui.call("turn.send", sessionId=sid, text="long")
    await ui.until(lambda: ui.note("session.event"))
    busy = await ui.call("turn.send", sessionId=sid, text="again")
    assert busy["code"] == -32600 and "already running" in busy["message"]
    assert (await ui.call("turn.steer", sessionId=sid, text="hurry"))["steered"]
    assert (await ui.call("turn.cancel", sessionId=sid))["accepted"]
    ended = await ui.until(lambda: ui.events("TurnEnded"))
    assert ended[0]["stopReason"] == "cancelled"
    assert (await ui.call("session.get", sessionId="ses_nope"))["code"] == -32002
    assert (await ui.call("session.setMode", sessionId=sid, mode="nope"))["code"] == -32602
    # A mode that requires a sandbox: the session says which, and whether it holds here.
    await ui.call("session.setMode", sessionId=sid, mode="auto")
    sandbox = (await ui.call("session.get", sessionId=sid))["sandbox"]
    assert sandbox == enforcement("workspace") and sandbox.startswith("workspace: ")
    assert (await ui.call("session.create", cwd="relative"))["code"] == -32602
    assert (await ui.call("no.such"))["code"] == -32601
    models = await ui.call("models.list")
    assert {m["id"] for m in models["models"]} == {"s", "echo"} and models["default"] == "s"
    assert (await ui.call("modes.list"))["default"] == "ask"
    assert (await ui.call("a2a.status"))["mounted"] is False
    await ui.close()


async def test_a_ui_can_browse_the_directories_a_session_may_work_in(
    gateway: Any, tmp_path: Path
) -> None:
    g = await gateway([])
    ui = await g.connect()
    tmp_path = tmp_path / "tree"
    for name in ("beta", "Alpha", "gamma", ".hidden"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("not a directory")
    (tmp_path / "to-beta").symlink_to(tmp_path / "beta")
    listed = await ui.call("directory.list", path=str(tmp_path / "beta" / ".."))
    assert listed["path"] == str(tmp_path.resolve())  # resolved
    assert listed["directories"] == ["Alpha", "beta", "gamma", "to-beta"]
    assert listed["parent"] == str(tmp_path.resolve().parent) and not listed["truncated"]
    assert (await ui.call("directory.list", path="/"))["parent"] is None
    for bad in ("relative", str(tmp_path / "notes.txt"), str(tmp_path / "missing")):
        refused = await ui.call("directory.list", path=bad)
        assert refused["code"] == -32602 and "directory" in refused["message"], refused
    hello = await ui.call("system.hello")
    assert hello["home"] == str(Path.home())  # what the page shows as ~
    await ui.close()


async def test_closing_stops_the_turn_and_a_closed_session_takes_no_turn(
    gateway: Any, tmp_path: Path
) -> None:
    g = await gateway([{"text": "never", "delayMs": 30_000}])
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await ui.call("turn.send", sessionId=sid, text="long")
    await ui.until(lambda: ui.note("session.event"))
    await ui.call("session.close", sessionId=sid)  # returns once the turn has stopped
    assert [e["stopReason"] for e in ui.events("TurnEnded")] == ["cancelled"]
    refused = await ui.call("turn.send", sessionId=sid, text="again")
    assert refused["code"] == -32600 and "is closed" in refused["message"]
    assert (await ui.call("session.get", sessionId=sid))["session"]["closed"] is True
    history = (await ui.call("session.get", sessionId=sid))["history"]
    assert sum(e["type"] == "TurnStarted" for e in history) == 1  # "again" never ran
    await ui.close()


async def test_who_is_let_in(gateway: Any) -> None:
    g = await gateway([])
    port = g.server.port
    health = await g.http.get(g.base + "/health")
    assert health.status == 200 and TOKEN not in await health.text()
    for headers, status in (
        ({}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"}, 403),
        ({"Authorization": f"Bearer {TOKEN}", "Host": f"evil.example:{port}"}, 403),
    ):
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await g.http.ws_connect(g.base + "/rpc", headers=headers)
        assert info.value.status == status
    code = g.gate.new_login_code()
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as browser:
        login = await browser.get(f"{g.base}/login?code={code}", allow_redirects=False)
        assert login.status == 302
        cookie = login.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and COOKIE in cookie
        ws = await browser.ws_connect(
            g.base + "/rpc", headers={"Origin": f"http://127.0.0.1:{port}"}
        )
        await ws.close()
        # The used link again, in the browser it logged in (its cookie sent): the page.
        again = await browser.get(f"{g.base}/login?code={code}", allow_redirects=False)
        assert again.status == 302 and again.headers["Location"] == "/"
        assert "Set-Cookie" not in again.headers
    async with aiohttp.ClientSession() as stranger:  # no cookie: the spent link is refused
        spent = await stranger.get(f"{g.base}/login?code={code}", allow_redirects=False)
        assert spent.status == 403 and "used already" in await spent.text()


def test_the_web_uis_error_codes_and_labels_are_generated_from_the_contract() -> None:
    from raven.rpc.contract import web_module
    from raven.web import FILES

    assert (FILES / "contract.js").read_text() == web_module(), REGENERATE
    assert "CODES.CURSOR_EXPIRED" in (FILES / "app.js").read_text()
    assert not re.search(r"-320\d\d", (FILES / "app.js").read_text())  # no literal codes


def test_the_rpc_reference_in_docs_is_generated_from_the_document() -> None:
    from raven.rpc.contract import markdown_reference, openrpc_document

    docs = Path(__file__).parents[2] / "docs" / "rpc.md"
    assert docs.read_text() == markdown_reference(openrpc_document(events_schema())), REGENERATE


async def test_a_ui_that_reconnects_mid_turn_gets_the_session_back(
    gateway: Any, tmp_path: Path
) -> None:
    write = {"name": "write_file", "arguments": {"path": "late.txt", "content": "x"}}
    g = await gateway([{"toolCalls": [write]}, {"text": "done"}])
    first = await g.connect()
    sid = (await first.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await first.call("turn.send", sessionId=sid, text="write later")
    await first.until(lambda: first.note("permission.requested"))
    await first.close()  # the page reloads while the turn waits for an answer
    again = await g.connect()
    detail = await again.call("session.get", sessionId=sid)
    assert detail["session"]["busy"] is True
    assert detail["history"][0]["type"] == "TurnStarted"
    (waiting,) = detail["pending"]  # the question still waits, for whichever UI answers
    assert waiting["method"] == "permission.requested" and waiting["title"] == "Write late.txt"
    await again.call("session.subscribe", sessionId=sid, after=detail["cursor"])
    await again.call("permission.respond", requestId=waiting["requestId"], decision="allow_once")
    ended = await again.until(lambda: again.events("TurnEnded"))
    assert ended[0]["stopReason"] == "end_turn" and (tmp_path / "late.txt").exists()
    # The snapshot and what followed it are the turn once: one start, one call, one end.
    seen = [*detail["history"], *(n["params"]["event"] for n in again.notes if is_event(n))]
    assert [e["type"] for e in seen].count("ToolCallStarted") == 1
    assert [e["type"] for e in seen].count("TurnStarted") == 1
    await again.close()


def is_event(note: dict[str, Any]) -> bool:
    return note["method"] == "session.event"


async def test_a_ui_back_from_a_dropped_connection_gets_exactly_what_it_missed(
    gateway: Any, tmp_path: Path
) -> None:
    g = await gateway([{"text": "one two three four five six seven eight", "wordDelayMs": 30}])
    watcher, sender = await g.connect(), await g.connect()
    sid = (await sender.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await watcher.call("session.subscribe", sessionId=sid)
    await sender.call("turn.send", sessionId=sid, text="count")
    await watcher.until(lambda: watcher.events("AgentText"))
    last_seen = [n for n in watcher.notes if is_event(n)][-1]["params"]["cursor"]
    await watcher.close()  # the network drops; the turn goes on
    await sender.until(
        lambda: len(sender.events("AgentText")) >= len(watcher.events("AgentText")) + 2
    )

    back = await g.connect()
    await back.call("session.subscribe", sessionId=sid, after=last_seen)
    await back.until(lambda: back.events("TurnEnded"))
    before = [n["params"] for n in watcher.notes if is_event(n)]
    after = [n["params"] for n in back.notes if is_event(n)]
    everything = [n["params"] for n in sender.notes if is_event(n)]
    assert before + after == everything  # nothing missed, nothing twice, in order
    text = "".join(p["event"]["text"] for p in everything if p["event"]["type"] == "AgentText")
    assert text == "one two three four five six seven eight"

    expired = await back.call("session.subscribe", sessionId=sid, after="0000.1")
    assert expired["code"] == -32004 and "session.get" not in expired["message"]
    await back.close()
    await sender.close()


async def test_the_next_turn_may_start_as_soon_as_turn_ended_arrives(
    gateway: Any, tmp_path: Path
) -> None:
    g = await gateway([])
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    for n in range(1, 4):
        assert (await ui.call("turn.send", sessionId=sid, text=f"turn {n}"))["accepted"]
        await ui.until(lambda n=n: len(ui.events("TurnEnded")) == n)
    assert [e["stopReason"] for e in ui.events("TurnEnded")] == ["end_turn"] * 3
    await ui.close()


async def test_a_question_is_answered_over_rpc(gateway: Any, tmp_path: Path) -> None:
    ask = {
        "name": "ask_user",
        "arguments": {"question": "Which branch?", "choices": ["main", "dev"]},
    }
    g = await gateway([{"toolCalls": [ask]}, {"text": "ok"}])
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await ui.call("turn.send", sessionId=sid, text="ask me")
    asked = await ui.until(lambda: ui.note("question.asked"))
    assert asked["text"] == "Which branch?" and asked["choices"] == ["main", "dev"]
    await ui.call("question.respond", requestId=asked["requestId"], answer="dev")
    await ui.until(lambda: ui.events("TurnEnded"))
    results = [e["content"] for e in ui.events("ToolCallUpdated") if e["status"] == "completed"]
    assert any("dev" in (r or "") for r in results)
    await ui.close()


async def _silent_subscriber(port: int, sid: str) -> socket.socket:
    """A UI that subscribes to `sid`, then never reads: a raw WebSocket with a small
    receive buffer."""
    import base64
    import os

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    handshake = (
        f"GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {TOKEN}\r\n\r\n"
    )
    await loop.sock_sendall(sock, handshake.encode())
    assert b"101" in await loop.sock_recv(sock, 1024)
    payload = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "session.subscribe", "params": {"sessionId": sid}}
    ).encode()
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert len(payload) < 126
    await loop.sock_sendall(sock, bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    return sock


async def _turn_heard(reader: Any, sid: str, text: str) -> None:
    await reader.call("system.hello")  # the subscriptions are in before the turn starts
    await reader.call("turn.send", sessionId=sid, text=text)
    async with asyncio.timeout(30):
        while not reader.events("TurnEnded"):
            reader.arrived.clear()
            await reader.arrived.wait()


async def test_a_socket_too_slow_to_keep_up_is_dropped_and_the_others_go_on(
    gateway: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("raven.gateway.rpc.MAX_BACKLOG_FRAMES", 20)
    monkeypatch.setattr("raven.gateway.rpc.STALL_S", 0.5)
    # ~6 MB, past what the kernel buffers of a socket hold, in few events: the cost of
    # the test is the volume, not thousands of events (which a loaded machine took over
    # half a minute to stream).
    words = " ".join("w" * 15_000 + str(i) for i in range(400))
    g = await gateway([{"text": words, "wordDelayMs": 1}])
    reader = await g.connect()
    sid = (await reader.call("session.create", cwd=str(tmp_path)))["sessionId"]
    sock = await _silent_subscriber(g.server.port, sid)
    await _turn_heard(reader, sid, "talk a lot")
    assert len(reader.events("AgentText")) == 400
    hub = g.server.app[HUB]
    # The slow one is dropped: by the backlog rules while the turn streams, or once its
    # socket took nothing for STALL_S after (where the kernel buffered more of the turn).
    async with asyncio.timeout(10):
        while len(hub.peers) > 1:
            await asyncio.sleep(0.05)
    assert [sid in peer.following for peer in hub.peers] == [True]
    sock.close()
    await reader.close()


async def test_the_gateway_stops_cleanly_after_a_write_to_a_stalled_ui_timed_out(
    gateway: Any, tmp_path: Path
) -> None:
    """aiohttp gives every writer of a connection one drain waiter, and a write cancelled
    by its deadline leaves it cancelled for the next (aio-libs/aiohttp#12307): the
    shutdown's close of that socket raised CancelledError and the gateway did not stop."""
    g = await gateway([{"text": "unused"}])
    live = await g.runtime.new_session(tmp_path)
    sock = await _silent_subscriber(g.server.port, live.id)
    sockets = g.server.app[SOCKETS]
    async with asyncio.timeout(10):
        while not sockets:
            await asyncio.sleep(0.01)
    (stalled,) = list(sockets)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            while True:  # past the kernel's buffers: the write waits on the UI
                await stalled.send_bytes(b"x" * 1_000_000)
    try:
        async with asyncio.timeout(10):
            await g.server.close()  # within the close's own deadline
    except asyncio.CancelledError:
        pytest.fail("the gateway's shutdown raised CancelledError")
    assert stalled.closed
    sock.close()


async def test_a_socket_that_stops_reading_as_the_turn_ends_is_closed_1013(
    gateway: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What waits for it is under every backlog limit and no frame comes after: it is
    closed all the same once it has taken nothing for `STALL_S`, not kept open for ever."""
    monkeypatch.setattr("raven.gateway.rpc.STALL_S", 0.5)
    words = " ".join("w" * 10_000 + str(i) for i in range(150))  # 1.5 MB: under the limits
    g = await gateway([{"text": words}])
    reader = await g.connect()
    sid = (await reader.call("session.create", cwd=str(tmp_path)))["sessionId"]
    sock = await _silent_subscriber(g.server.port, sid)
    await _turn_heard(reader, sid, "talk")
    hub = g.server.app[HUB]
    async with asyncio.timeout(10):
        while len(hub.peers) > 1:
            await asyncio.sleep(0.05)
    sock.setblocking(True)
    sock.settimeout(10)
    received = b""
    while not (chunk := await asyncio.to_thread(sock.recv, 1 << 20)) == b"":
        received += chunk  # what was waiting, then the close frame
    assert b"\x88\x0a\x03\xf5too slow" in received  # close, 1013 "too slow"
    sock.close()
    await reader.close()


async def test_a_ui_that_left_is_let_go_at_once_even_with_bytes_waiting_for_it(
    gateway: Any, tmp_path: Path
) -> None:
    """The watch on a socket that has bytes waiting is ended with the socket: armed, it
    kept the UI's whole state (its connection, queues, socket) for `STALL_S` after the UI
    left, and a gateway that many UIs came and went through held hundreds of them."""
    words = " ".join("w" * 10_000 + str(i) for i in range(30))  # 300 KB: past the buffers
    g = await gateway([{"text": words}])
    reader = await g.connect()
    sid = (await reader.call("session.create", cwd=str(tmp_path)))["sessionId"]
    hub = g.server.app[HUB]
    (reading,) = hub.peers
    sock = await _silent_subscriber(g.server.port, sid)
    await _turn_heard(reader, sid, "talk")
    (silent,) = hub.peers - {reading}
    async with asyncio.timeout(DEADLINE_S):
        while silent._watch is None:  # armed once bytes wait in its socket
            await asyncio.sleep(0.01)
    gone = weakref.ref(silent)
    del silent
    sock.close()
    async with asyncio.timeout(STALL_S / 2):  # not kept until the watch would look again
        while gone() is not None:
            gc.collect()
            await asyncio.sleep(0.02)
    await reader.close()


async def test_the_page_is_served_with_a_strict_policy_and_links_need_the_token(
    gateway: Any,
) -> None:
    g = await gateway([])
    page = await g.http.get(g.base + "/")
    assert page.status == 200 and "<title>Raven</title>" in await page.text()
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    script = await g.http.get(g.base + "/app/app.js")
    assert script.status == 200 and "javascript" in script.headers["Content-Type"]
    for path in ("/app/../auth.py", "/app/%2e%2e/__init__.py", "/app/"):
        assert (await g.http.get(g.base + path)).status in (403, 404), path
    assert (await g.http.post(g.base + "/login-links")).status == 401
    wrong = {"Authorization": "Bearer wrong"}
    assert (await g.http.post(g.base + "/login-links", headers=wrong)).status == 401
    minted = await g.http.post(
        g.base + "/login-links", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    path = (await minted.json())["path"]
    login = await g.http.get(g.base + path, allow_redirects=False)
    assert login.status == 302 and COOKIE in login.headers["Set-Cookie"]


def test_a_login_cookie_outlives_a_restart_and_dies_with_the_token() -> None:
    first = Gatekeeper(TOKEN, {"127.0.0.1:1"})
    cookie = first.spend_login_code(first.new_login_code())
    assert cookie is not None and first.authorized(None, cookie)
    assert Gatekeeper(TOKEN, {"127.0.0.1:1"}).authorized(None, cookie)  # the gateway restarted
    assert not Gatekeeper("another-token", {"127.0.0.1:1"}).authorized(None, cookie)
    nonce, _, signature = cookie.partition(".")
    assert not first.authorized(None, f"{nonce}x.{signature}")
    assert not first.authorized(None, nonce) and not first.authorized(None, "")


def test_a_login_link_expires_unused() -> None:
    now = [1000.0]
    gate = Gatekeeper(TOKEN, {"127.0.0.1:1"}, clock=lambda: now[0])
    early, late = gate.new_login_code(), gate.new_login_code()
    now[0] += LOGIN_LINK_TTL_S - 1
    assert gate.spend_login_code(early) is not None
    now[0] += 2
    assert gate.spend_login_code(late) is None


async def test_an_expired_login_link_is_refused_saying_so(
    gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = await gateway([])
    monkeypatch.setattr("raven.gateway.auth.LOGIN_LINK_TTL_S", 0.0)
    minted = await g.http.post(
        g.base + "/login-links", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    login = await g.http.get(g.base + (await minted.json())["path"], allow_redirects=False)
    assert login.status == 403 and "expired" in await login.text()
    assert COOKIE not in login.headers.get("Set-Cookie", "")


async def test_deep_or_invalid_frames_get_errors_and_the_socket_is_still_served(
    gateway: Any,
) -> None:
    g = await gateway([])
    client = await g.connect()
    await client.ws.send_str("[" * 100_000 + "]" * 100_000)
    await client.ws.send_str('{"jsonrpc": "aaa", "method": "system.hello"}')
    await client.until(lambda: len(client.unattributed) == 2)
    assert [e["error"]["code"] for e in client.unattributed] == [-32700, -32600]
    assert "version" in await client.call("system.hello")
    await client.close()


async def test_an_asking_answered_through_the_engine_by_another_face_is_settled_for_every_ui(
    gateway: Any, tmp_path: Path
) -> None:
    write = {"name": "write_file", "arguments": {"path": "other.txt", "content": "x"}}
    g = await gateway([{"toolCalls": [write]}, {"text": "done"}])
    starter, onlooker = await g.connect(), await g.connect()  # the onlooker follows nothing
    sid = (await starter.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await starter.call("turn.send", sessionId=sid, text="write it")
    asked = await onlooker.until(lambda: onlooker.note("permission.requested"))
    # One registry of askings: the engine's. Another face (an editor, a peer) answers there.
    assert await g.runtime.answer(sid, asked["requestId"], "allow_once")
    await starter.until(lambda: starter.events("TurnEnded"))
    assert (tmp_path / "other.txt").exists()
    for ui in (starter, onlooker):
        await ui.until(lambda ui=ui: ui.note("request.settled"))
        assert ui.note("request.settled") == {"requestId": asked["requestId"]}
    late = await onlooker.call(
        "permission.respond", requestId=asked["requestId"], decision="reject_once"
    )
    assert late["code"] == -32003
    assert (await onlooker.call("session.get", sessionId=sid))["pending"] == []
    await starter.close()
    await onlooker.close()


async def test_a_session_is_compacted_on_demand_and_every_ui_sees_it(
    gateway: Any, tmp_path: Path
) -> None:
    answers = [{"text": word} for word in ("One.", "Two.", "Three.")]
    summary = {"text": "The user counted to three."}
    g = await gateway([*answers, summary, {"text": "Four."}])
    ui, other = await g.connect(), await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await other.call("session.subscribe", sessionId=sid)
    for n, word in enumerate(("one", "two", "three"), start=1):
        await ui.call("turn.send", sessionId=sid, text=word)
        await ui.until(lambda n=n: len(ui.events("TurnEnded")) == n)
    done = await ui.call("session.compact", sessionId=sid)
    assert done["status"] == "completed" and done["summary"] == "The user counted to three."
    told = await other.until(lambda: other.events("CompactionUpdated")[1:])
    assert [e["status"] for e in told] == ["completed"]
    streamed = "".join(e["text"] for e in other.events("CompactionText"))
    assert streamed.strip() == done["summary"]
    # The next turn's model call sees the summary and the newest turn, not the first two.
    await ui.call("turn.send", sessionId=sid, text="four")
    await ui.until(lambda: len(ui.events("TurnEnded")) == 4)
    live = g.runtime.live(sid)
    assert live.summary == done["summary"]
    assert [m.text for m in live.model_messages() if m.role == "user"] == ["three", "four"]
    # The stored session still replays every turn, and the compaction where it happened.
    history = (await ui.call("session.get", sessionId=sid))["history"]
    said = [e["parts"][0]["text"] for e in history if e["type"] == "TurnStarted"]
    assert said == ["one", "two", "three", "four"]
    assert any(e["type"] == "CompactionUpdated" for e in history)
    await ui.close()
    await other.close()


async def test_compacting_a_session_too_short_or_busy_is_refused(
    gateway: Any, tmp_path: Path
) -> None:
    g = await gateway([{"text": "Hi."}, {"text": "slow", "waitFor": str(tmp_path / "gate")}])
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await ui.call("turn.send", sessionId=sid, text="hi")
    await ui.until(lambda: ui.events("TurnEnded"))
    short = await ui.call("session.compact", sessionId=sid)
    assert short["code"] == -32600 and "nothing older" in short["message"]
    await ui.call("turn.send", sessionId=sid, text="go")
    await ui.until(lambda: len(ui.events("TurnStarted")) == 2)
    busy = await ui.call("session.compact", sessionId=sid)
    assert busy["code"] == -32600
    (tmp_path / "gate").touch()
    await ui.until(lambda: len(ui.events("TurnEnded")) == 2)
    assert len(await g.runtime.transcript(sid)) == 4  # nothing was added
    await ui.close()


async def test_a_session_no_ui_follows_leaves_memory_and_comes_back_from_the_store(
    gateway: Any, tmp_path: Path
) -> None:
    steps = [
        {"text": "One."},
        {"text": "slow", "waitFor": str(tmp_path / "gate")},
        {"text": "Three."},
    ]
    g = await gateway(steps, limits={"idleSessionS": 0.05})
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await ui.call("turn.send", sessionId=sid, text="one")
    await ui.until(lambda: ui.events("TurnEnded"))
    await ui.close()  # the last UI leaves: the session goes once idle
    async with asyncio.timeout(DEADLINE_S):
        while g.runtime.live(sid) is not None:
            await asyncio.sleep(0.01)
    # A turn whose UI left stays in memory as long as it runs.
    ui = await g.connect()
    await ui.call("turn.send", sessionId=sid, text="two")
    await ui.until(lambda: ui.events("TurnStarted"))
    await ui.close()
    live = g.runtime.live(sid)
    await asyncio.sleep(0.2)  # four times the idle time: it would be gone if it could go
    assert g.runtime.live(sid) is live and live.is_busy
    (tmp_path / "gate").touch()
    async with asyncio.timeout(DEADLINE_S):
        while g.runtime.live(sid) is not None:
            await asyncio.sleep(0.01)
    # Read again from the store, the session goes on where it was.
    ui = await g.connect()
    history = (await ui.call("session.get", sessionId=sid))["history"]
    said = [e["text"] for e in history if e["type"] == "AgentText"]
    assert said == ["One.", "slow"]
    await ui.call("turn.send", sessionId=sid, text="three")
    ended = await ui.until(lambda: ui.events("TurnEnded"))
    assert ended[0]["stopReason"] == "end_turn"
    await ui.close()


async def test_sockets_that_come_and_go_leave_no_task_or_session_behind(
    gateway: Any, tmp_path: Path
) -> None:
    """Each socket's writer ends with it, also when aiohttp cancels the handler of a
    connection that went away, and the sessions go once idle: 40 UIs that each sent a
    turn and left leave nothing running and nothing in memory."""
    g = await gateway([{"text": "Hi."}] * 40, limits={"idleSessionS": 0.05})

    async def one() -> str:
        ui = await g.connect()
        sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
        await ui.call("turn.send", sessionId=sid, text="hi")
        await ui.until(lambda: ui.events("TurnEnded"))
        await ui.close()
        return str(sid)

    made = await asyncio.gather(*(one() for _ in range(40)))

    def left() -> list[object]:
        writers = [
            t
            for t in asyncio.all_tasks()
            if t.get_coro().__qualname__ == "Connection._drain_outbox"  # type: ignore[union-attr]
        ]
        return [*writers, *filter(None, map(g.runtime.live, made))]

    async with asyncio.timeout(DEADLINE_S):
        while left():
            await asyncio.sleep(0.02)


async def test_a_sessions_usage_is_read_once_and_kept_up_to_date(
    gateway: Any, tmp_path: Path
) -> None:
    """`session.get` adds up the session's usage from its whole transcript the first time
    only; the turns after add to it as they are stored."""
    g = await gateway([{"text": "One."}, {"text": "Two."}])
    ui = await g.connect()
    sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
    await ui.call("turn.send", sessionId=sid, text="one")
    await ui.until(lambda: ui.events("TurnEnded"))
    read: list[str] = []
    whole = g.runtime.store.messages

    async def counted(session_id: str, *args: Any, **kwargs: Any) -> Any:
        read.append(session_id)
        return await whole(session_id, *args, **kwargs)

    g.runtime.store.messages = counted  # type: ignore[method-assign]
    first = (await ui.call("session.get", sessionId=sid))["usage"]
    await ui.call("turn.send", sessionId=sid, text="two")
    await ui.until(lambda: len(ui.events("TurnEnded")) == 2)
    second = (await ui.call("session.get", sessionId=sid))["usage"]
    (one,), (two,) = first["models"].values(), second["models"].values()
    assert (one["calls"], two["calls"]) == (1, 2)
    assert two["outputTokens"] > one["outputTokens"]
    assert read == [sid]  # the transcript was read for the first get alone
    await ui.close()

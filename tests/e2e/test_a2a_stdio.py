"""`raven a2a stdio` as a parent process launches it: A2A over its pipes, framed with
Content-Length, a handshake first, several requests at once, streams that end or are
cancelled, bad frames answered without ending the session, and no port opened."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentInterface

from tests.conftest import RAVEN, raven, write_config
from tests.e2e.test_a2a import SCENARIO_SCRIPT, check_scenario, sdk_scenario

DEADLINE_S = 30


class Peer:
    """The parent: Raven's pipes, read frame by frame."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.frames: list[dict[str, Any]] = []
        self._more = asyncio.Condition()
        self._reading = asyncio.create_task(self._read())

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            try:
                header = await out.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as end:
                assert not end.partial  # nothing but whole frames
                break
            name, _, value = header.decode().strip().partition(":")
            assert name == "Content-Length", header  # stdout holds frames and nothing else
            body = json.loads(await out.readexactly(int(value)))
            async with self._more:
                self.frames.append(body)
                self._more.notify_all()

    async def frame(self, wanted: Any) -> dict[str, Any]:
        """The first frame `wanted(frame)` accepts, waiting for it."""
        async with asyncio.timeout(DEADLINE_S), self._more:
            await self._more.wait_for(lambda: any(wanted(f) for f in self.frames))
        return next(f for f in self.frames if wanted(f))

    async def each(self, request_id: Any) -> AsyncIterator[dict[str, Any]]:
        """The frames answering `request_id`, in order, as they come, to its stream's end."""
        seen = 0
        while True:
            async with asyncio.timeout(DEADLINE_S), self._more:
                await self._more.wait_for(lambda n=seen: len(self.stream(request_id)) > n)
            for answer in self.stream(request_id)[seen:]:
                seen += 1
                if answer.get("streamEnd"):
                    return
                yield answer
                if "error" in answer:
                    return

    async def send(self, message: dict[str, Any] | bytes) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        await self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def call(self, request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await self.answer(request_id)

    async def answer(self, request_id: Any) -> dict[str, Any]:
        return await self.frame(lambda f: f.get("id") == request_id and "streamEnd" not in f)

    def stream(self, request_id: Any) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("id") == request_id]

    async def ended(self) -> int:
        async with asyncio.timeout(DEADLINE_S):
            code = await self.proc.wait()
            await self._reading
        return code


def message(text: str, **fields: Any) -> dict[str, Any]:
    parts = [{"text": text}]
    return {
        "message": {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": parts, **fields}
    }


async def launch(
    home: Path, env: dict[str, str], steps: list[dict[str, Any]], **server: Any
) -> Peer:
    (home / "script.json").write_text(json.dumps(steps))
    models = [{"id": "s", "provider": "scripted", "script": "script.json"}]
    write_config(home, {"models": models, "a2a": {"server": server}})  # no token at all
    proc = await asyncio.create_subprocess_exec(
        *RAVEN,
        "a2a",
        "stdio",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=64 * 1024 * 1024,
    )
    return Peer(proc)


def ports_of(pid: int) -> set[int]:
    """The inodes of `pid`'s sockets that are TCP or UDP ones (any state)."""
    mine = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = (
            os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.exists(f"/proc/{pid}/fd/{fd}") else ""
        )
        if target.startswith("socket:["):
            mine.add(int(target[8:-1]))
    inet = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            inet.add(int(line.split()[9]))
    return mine & inet


async def test_a_parent_drives_raven_over_its_pipes_with_no_port(
    home: Path, env: dict[str, str]
) -> None:
    gate = home / "go on"
    steps = [
        {"text": "the first answer"},
        {"text": "slow and steady", "waitFor": str(gate)},
        {"text": "after the stream"},
    ]
    peer = await launch(home, env, steps, maxBodyBytes=4096)
    hello = await peer.frame(lambda f: f.get("type") == "handshake")
    assert hello["protocol"] == "a2a-stdio" and hello["supportedVariants"] == ["stdio-json"]
    assert hello["pid"] == peer.proc.pid and peer.frames[0] is hello  # it speaks first
    await peer.send(
        {
            "type": "handshakeAck",
            "sessionId": hello["sessionId"],
            "selectVariant": "stdio-json",
            "accept": True,
        }
    )

    card = (await peer.call(1, "GetExtendedAgentCard", {}))["result"]
    assert card["supportedInterfaces"] == [
        {"url": "stdio", "protocolBinding": "STDIO", "protocolVersion": "1.0"}
    ]
    assert "securityRequirements" not in card  # the parent is the peer: no token

    done = (await peer.call(2, "SendMessage", message("hello")))["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["status"]["message"]["parts"][0]["text"] == "the first answer"

    # A stream and other requests at once, each answered under its own id.
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": "s",
            "method": "SendStreamingMessage",
            "params": message("stream it"),
        }
    )
    first = await peer.answer("s")
    task_id = first["result"]["task"]["id"]
    got = (await peer.call(3, "GetTask", {"id": task_id}))["result"]
    assert got["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    listed = (await peer.call(4, "ListTasks", {}))["result"]
    assert {t["id"] for t in listed["tasks"]} >= {done["id"], task_id}
    gate.touch()
    end = await peer.frame(lambda f: f.get("id") == "s" and f.get("streamEnd") is True)
    stream = peer.stream("s")
    assert stream[-1] is end
    states = [
        f["result"]["statusUpdate"]["status"]["state"]
        for f in stream
        if "statusUpdate" in f.get("result", {})
    ]
    assert states[-1] == "TASK_STATE_COMPLETED" and "TASK_STATE_WORKING" in states

    # Bad input is answered, and the session goes on.
    await peer.send(b"{not json")
    parse = await peer.frame(lambda f: f.get("error", {}).get("code") == -32700)
    assert parse["id"] is None
    unknown = await peer.call(5, "tasks/get", {"id": task_id})
    assert unknown["error"]["code"] == -32601
    missing = await peer.call(6, "GetTask", {"id": "no-such-task"})
    assert missing["error"]["code"] == -32001
    oversized = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "pad": "' + b"x" * 5000 + b'"}'
    )
    await peer.send(oversized)
    too_large = await peer.frame(lambda f: "too large" in f.get("error", {}).get("message", ""))
    assert too_large["error"]["code"] == -32000
    after = (await peer.call(8, "SendMessage", message("still there?")))["result"]["task"]
    assert after["status"]["message"]["parts"][0]["text"] == "after the stream"

    assert ports_of(peer.proc.pid) == set()  # nothing listens, nothing connects
    await peer.send({"jsonrpc": "2.0", "id": 9, "method": "system/shutdown"})
    assert (await peer.answer(9))["result"] == {}
    assert await peer.ended() == 0


async def test_the_end_of_stdin_stops_the_turns_answers_and_exits(
    home: Path, env: dict[str, str]
) -> None:
    steps = [{"text": "never said", "waitFor": str(home / "never")}, {"text": "unused"}]
    peer = await launch(home, env, steps, maxBodyBytes=4096)
    await peer.frame(lambda f: f.get("type") == "handshake")
    # A client that sends no handshake (a2a-spec#1074) is served all the same.
    await peer.send(
        {"jsonrpc": "2.0", "id": "w", "method": "SendMessage", "params": message("wait")}
    )
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": "t",
            "method": "SendStreamingMessage",
            "params": message("and this"),
        }
    )
    await peer.answer("t")  # the stream began
    assert peer.proc.stdin is not None
    peer.proc.stdin.close()
    blocked = await peer.answer("w")
    assert blocked["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
    assert "stopped" in blocked["result"]["task"]["status"]["message"]["parts"][0]["text"]
    assert await peer.ended() == 0
    assert peer.stream("t")[-1].get("streamEnd") is True


async def test_a_stream_cancelled_by_the_client_ends_while_its_task_goes_on(
    home: Path, env: dict[str, str]
) -> None:
    gate = home / "go on"
    peer = await launch(home, env, [{"text": "done anyway", "waitFor": str(gate)}])
    await peer.frame(lambda f: f.get("type") == "handshake")
    await peer.send(
        {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": message("go")}
    )
    task_id = (await peer.answer(1))["result"]["task"]["id"]
    await peer.send({"jsonrpc": "2.0", "id": 1, "cancelStream": True})
    await peer.frame(lambda f: f.get("id") == 1 and f.get("streamEnd") is True)
    gate.touch()
    async with asyncio.timeout(DEADLINE_S):
        while True:
            task = (await peer.call(os.urandom(4).hex(), "GetTask", {"id": task_id}))["result"]
            if task["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.05)
    await peer.send({"type": "handshakeAck", "accept": False})  # too late to decline: ignored
    await peer.send({"jsonrpc": "2.0", "id": 2, "method": "system/shutdown"})
    assert await peer.ended() == 0


def stdio_agent(tmp_path: Path, steps: list[dict[str, Any]], marker: str) -> dict[str, Any]:
    """An `agents` entry for another Raven served over stdio, with a scripted model of its
    own, marked in its environment so that the test can find it (and its children)."""
    child = tmp_path / "child"
    child.mkdir()
    (child / "script.json").write_text(json.dumps(steps))
    models = [{"id": "s", "provider": "scripted", "script": "script.json"}]
    write_config(child, {"models": models})
    return {
        "name": "helper",
        "description": "another Raven",
        "protocol": "a2a-stdio",
        "command": RAVEN[0],
        "args": [*RAVEN[1:], "a2a", "stdio"],
        "env": {"RAVEN_HOME": str(child), "RAVEN_TEST_MARK": marker},
    }


def marked(marker: str) -> list[int]:
    """The processes whose environment holds `RAVEN_TEST_MARK=marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if f"RAVEN_TEST_MARK={marker}".encode() in environ.split(b"\0"):
            found.append(int(pid))
    return found


def test_raven_asks_an_agent_it_starts_over_stdio_and_keeps_it_for_the_session(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    marker = os.urandom(6).hex()
    helper = stdio_agent(tmp_path, [{"text": "one"}, {"text": "two"}], marker)
    ask = {"name": "a2a_send", "arguments": {"agent": "helper", "message": "count"}}
    steps = [{"toolCalls": [ask]}, {"toolCalls": [ask]}, {"text": "counted"}]
    (home / "script.json").write_text(json.dumps(steps))
    models = [{"id": "s", "provider": "scripted", "script": "script.json"}]
    write_config(home, {"models": models, "agents": [helper]})
    ran = raven("run", "--yes", "count twice", env=env, cwd=tmp_path, timeout=DEADLINE_S * 2)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "counted"
    listed = raven("sessions", "list", "--json", env=env)
    (session,) = json.loads(listed.stdout)
    shown = json.loads(raven("sessions", "show", session["id"], "--json", env=env).stdout)
    results = [m for m in shown["messages"] if m["role"] == "tool"]
    # One agent for the session: the second call is its second answer (a new process
    # would have started its script again and said "one" twice).
    assert [r["content"].split("\n")[0] for r in results] == ["one", "two"], results
    assert marked(marker) == []  # stopped with the session, children and all

    # `raven agents list` starts it, greets it and reads its card.
    listed = raven("agents", "list", "--json", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["protocol"] == "a2a-stdio" and row["status"] == "ready"
    assert row["agentName"] == "Raven"
    assert marked(marker) == []

    delegated = raven("agents", "run", "helper", "hi", env=env, cwd=tmp_path)
    assert delegated.returncode != 0 and "raven a2a send helper" in delegated.stderr

    # From the command line, by name; a file in its reply would land in ./a2a-inbox/helper.
    sent = raven("a2a", "send", "helper", "again", env=env, cwd=tmp_path, timeout=DEADLINE_S)
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "one"  # a new agent for one call
    assert marked(marker) == []


async def test_a_frame_split_across_writes_is_read_whole_and_one_cut_short_ends_cleanly(
    home: Path, env: dict[str, str]
) -> None:
    peer = await launch(home, env, [{"text": "pieced together"}])
    await peer.frame(lambda f: f.get("type") == "handshake")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi")})
    data = b"Content-Length: %d\r\n\r\n" % len(body.encode()) + body.encode()
    for piece in (data[:7], data[7:30], data[30:-5], data[-5:]):  # header and body split
        await peer.write(piece)
        await asyncio.sleep(0)  # each its own write on the pipe
    answer = await peer.answer(1)
    assert answer["result"]["task"]["status"]["message"]["parts"][0]["text"] == "pieced together"
    await peer.write(b'Content-Length: 100\r\n\r\n{"jsonrpc": "2.0", "id": 2')  # then the end
    assert peer.proc.stdin is not None
    peer.proc.stdin.close()
    said = await peer.frame(lambda f: "Unreadable frame" in f.get("error", {}).get("message", ""))
    assert said["id"] is None and "ended inside a frame" in said["error"]["message"]
    assert await peer.ended() == 2  # a clean exit with the reason; stdout held frames only


async def test_garbage_instead_of_a_header_is_answered_and_ends_the_session(
    home: Path, env: dict[str, str]
) -> None:
    peer = await launch(home, env, [])
    await peer.frame(lambda f: f.get("type") == "handshake")
    await peer.write(b"hello there\r\n\r\n")
    said = await peer.frame(lambda f: "Unreadable frame" in f.get("error", {}).get("message", ""))
    assert "malformed header" in said["error"]["message"]
    assert await peer.ended() == 2


class PipeTransport(httpx.AsyncBaseTransport):
    """The A2A SDK's own JSON-RPC client, carried over Raven's pipes instead of HTTP: each
    POST becomes a frame (under an id of its own, as two clients share the pipes), its
    answer the response; a streaming method's frames become server-sent events."""

    STREAMING = ("SendStreamingMessage", "SubscribeToTask")
    _ids = itertools.count(1)
    """Shared by every client on the pipes: an id is one request's only."""

    def __init__(self, peer: Peer) -> None:
        self._peer = peer

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(await request.aread())
        own, theirs = f"sdk-{next(self._ids)}", body.get("id")
        await self._peer.send({**body, "id": own})
        if body.get("method") in self.STREAMING:
            events = _Events(self._peer.each(own), theirs)
            return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=events)
        return httpx.Response(200, json={**await self._peer.answer(own), "id": theirs})


class _Events(httpx.AsyncByteStream):
    def __init__(self, frames: AsyncIterator[dict[str, Any]], request_id: Any) -> None:
        self._frames, self._id = frames, request_id

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for answer in self._frames:
            yield b"data: " + json.dumps({**answer, "id": self._id}).encode() + b"\n\n"


async def test_the_sdks_own_client_runs_the_whole_scenario_over_stdio(
    home: Path, env: dict[str, str]
) -> None:
    """The scenario every HTTP binding runs (send, get, list, stream, subscribe, a question
    answered by the same task, cancel, a missing task), by the SDK's client, not Raven's."""
    peer = await launch(home, env, SCENARIO_SCRIPT)
    await peer.frame(lambda f: f.get("type") == "handshake")
    raw = (await peer.call("card", "GetExtendedAgentCard", {}))["result"]
    card = parse_agent_card(raw)
    del card.supported_interfaces[:]  # the SDK's JSON-RPC client, to the pipes
    card.supported_interfaces.append(
        AgentInterface(url="http://pipes/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
    )
    made = []
    for streaming in (False, True):
        http = httpx.AsyncClient(transport=PipeTransport(peer), headers={"A2A-Version": "1.0"})
        config = ClientConfig(streaming=streaming, httpx_client=http)
        made += [ClientFactory(config).create(card), http]
    check_scenario(await sdk_scenario(*made))
    await peer.send({"jsonrpc": "2.0", "id": "bye", "method": "system/shutdown"})
    assert await peer.ended() == 0

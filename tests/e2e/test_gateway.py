"""`raven gateway` launched as a user launches it: login link, token file, A2A mount, a second
gateway on the same port, and a clean stop."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import RAVEN, write_config
from tests.e2e.a2a_server import TOKEN as A2A_TOKEN
from tests.e2e.a2a_server import message
from tests.ports import free_port

DEADLINE_S = 30


def start(env: dict[str, str], port: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [*RAVEN, "gateway", "--port", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: dict[str, str] = {}
    deadline = time.monotonic() + DEADLINE_S
    while "login" not in lines and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        key, _, value = line.partition(":")
        lines[key.strip()] = value.strip()
    return proc, lines


def test_the_gateway_serves_rpc_and_mounts_a2a_when_enabled(
    env: dict[str, str], home: Path
) -> None:
    upper = {"name": "upper", "protocol": "cli", "command": "tr", "args": ["a-z", "A-Z"]}
    server = {"enabled": True, "token": A2A_TOKEN, "agents": ["upper"]}
    write_config(home, {"defaultModel": "echo", "a2a": {"server": server}, "agents": [upper]})
    port = free_port()
    proc, lines = start(env, port)
    try:
        assert lines["gateway"].startswith(f"http://127.0.0.1:{port}")
        assert lines["login"].split()[0].startswith(f"http://127.0.0.1:{port}/login?code=")
        token_file = home / "gateway.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(base + "/health").json()["ok"] is True
        assert httpx.get(base + "/rpc").status_code == 401
        assert asyncio.run(ask_with_the_sdk(base)) == "hi a2a"
        # A configured agent served beside Raven, at its own path.
        assert asyncio.run(ask_with_the_sdk(f"{base}/a2a/agents/upper")).strip() == "HI A2A"
        enabled = subprocess.run(
            [*RAVEN, "a2a", "enable"], env=env, capture_output=True, text=True, timeout=DEADLINE_S
        )
        assert f"gateway running at http://127.0.0.1:{port} must be restarted" in enabled.stdout
        second, _ = start(env, port)
        _, err = second.communicate(timeout=DEADLINE_S)
        assert second.returncode == 1
        assert f"pid {proc.pid}" in err and "already running" in err
        state = json.loads((home / "data" / "gateway.json").read_text())
        assert state["pid"] == proc.pid
        status = subprocess.run(
            [*RAVEN, "a2a", "status"], env=env, capture_output=True, text=True, timeout=DEADLINE_S
        ).stdout
        assert f"running:    {base}/a2a (the gateway, pid {proc.pid})" in status
        assert stat.S_IMODE((home / "data" / "gateway.json").stat().st_mode) == 0o600
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0
        assert not (home / "data" / "gateway.json").exists()
        logs = "".join(p.read_text() for p in (home / "logs").glob("*.log"))
        assert token not in logs and A2A_TOKEN not in logs
    finally:
        proc.kill()
        proc.communicate()


async def ask_with_the_sdk(base: str) -> str:
    """One message through the a2a-sdk's own client; the task's answer."""
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.helpers import get_message_text
    from a2a.types import Message, Part, Role, SendMessageRequest

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {A2A_TOKEN}"}) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        message = Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hi a2a")])
        events = [e async for e in client.send_message(SendMessageRequest(message=message))]
        await client.close()
    return get_message_text(events[-1].task.status.message)


def test_without_a2a_enabled_the_routes_are_absent(env: dict[str, str], home: Path) -> None:
    write_config(home, {"defaultModel": "echo"})
    port = free_port()
    proc, _ = start(env, port)
    try:
        assert httpx.post(f"http://127.0.0.1:{port}/a2a", json={}).status_code in (404, 405)
        assert httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json").status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)


def test_a_non_loopback_address_needs_allow_remote(env: dict[str, str]) -> None:
    result = subprocess.run(
        [*RAVEN, "gateway", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2 and "--allow-remote" in result.stderr


def scripted_gateway(
    env: dict[str, str], home: Path, steps: list[dict[str, Any]]
) -> tuple[subprocess.Popen[str], int]:
    """`raven gateway` on a free port whose model plays `steps`; the process and its port."""
    (home / "script.json").write_text(json.dumps(steps))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    port = free_port()
    proc, _ = start(env, port)
    return proc, port


class OtherUi:
    """Another UI of the gateway: a Raven RPC WebSocket the test drives call by call."""

    def __init__(self, http: Any, ws: Any) -> None:
        self._http, self._ws = http, ws
        self._ids = itertools.count(1)
        self.frames: list[dict[str, Any]] = []

    @classmethod
    async def connect(cls, home: Path, port: int) -> OtherUi:
        import aiohttp

        token = (home / "gateway.token").read_text().strip()
        http = aiohttp.ClientSession()
        ws = await http.ws_connect(
            f"ws://127.0.0.1:{port}/rpc", headers={"Authorization": f"Bearer {token}"}
        )
        return cls(http, ws)

    async def call(self, method: str, **params: Any) -> Any:
        n = next(self._ids)
        await self._ws.send_json({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
        return (await self.frame(lambda f: f.get("id") == n))["result"]

    async def frame(self, wanted: Any) -> dict[str, Any]:
        """The first frame `wanted` takes, waiting for it."""
        async with asyncio.timeout(DEADLINE_S):
            while not (found := [f for f in self.frames if wanted(f)]):
                self.frames.append(json.loads((await self._ws.receive()).data))
        return found[0]

    async def close(self) -> None:
        await self._ws.close()
        await self._http.close()


def test_chat_attaches_to_the_gateway_and_answers_its_approvals(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    from tests.e2e.test_chat import Terminal

    write = {"name": "write_file", "arguments": {"path": "attached.txt", "content": "hi"}}
    proc, port = scripted_gateway(env, home, [{"toolCalls": [write]}, {"text": "Wrote it."}])
    term = Terminal([*RAVEN, "chat", "--attach", "auto"], {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.expect(f"attached to http://127.0.0.1:{port}")
        term.expect("› ")
        term.type("write the file\n")
        term.expect("Allow Write attached.txt?")
        term.type("y\n")
        term.expect("Wrote it.")
        assert (tmp_path / "attached.txt").read_text() == "hi"
        term.type("/quit\n")
        assert term.proc.wait(DEADLINE_S) == 0
    finally:
        term.close()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)
    nothing = subprocess.run(
        [*RAVEN, "chat", "--attach", "auto"],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=DEADLINE_S,
    )
    assert nothing.returncode == 2 and "no running gateway" in nothing.stderr


async def start_a_turn(home: Path, port: int, cwd: Path) -> str:
    """What another UI does: a new session and a turn in it (left running); its id."""
    ui = await OtherUi.connect(home, port)
    try:
        sid = str((await ui.call("session.create", cwd=str(cwd)))["sessionId"])
        assert (await ui.call("turn.send", sessionId=sid, text="take your time"))["accepted"]
    finally:
        await ui.close()
    return sid


def test_chat_attached_beside_another_uis_turn_says_so_and_stays_at_the_prompt(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    from tests.e2e.test_chat import Terminal

    proc, port = scripted_gateway(env, home, [{"text": "slow", "delayMs": 60_000}])
    sid = asyncio.run(start_a_turn(home, port, tmp_path))
    chat = [*RAVEN, "chat", "--attach", "auto", "--session", sid]
    term = Terminal(chat, {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.expect("› take your time")  # the other UI's turn, replayed here
        term.expect("› ", after="take your time")
        term.type("me too\n")
        term.expect("not sent: a turn is already running in session")
        term.expect("› ", after="not sent")  # still at the prompt, not gone
        assert term.proc.poll() is None
        term.type("/quit\n")
        assert term.proc.wait(DEADLINE_S) == 0
    finally:
        term.close()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)


async def test_chat_attached_hears_another_ui_answer_its_question_and_goes_on(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    from tests.e2e.test_chat import Terminal

    write = {"name": "write_file", "arguments": {"path": "both.txt", "content": "hi"}}
    proc, port = scripted_gateway(env, home, [{"toolCalls": [write]}, {"text": "Wrote it."}])
    ui = await OtherUi.connect(home, port)
    term = None
    try:
        sid = (await ui.call("session.create", cwd=str(tmp_path)))["sessionId"]
        term = Terminal(
            [*RAVEN, "chat", "--attach", "auto", "--session", sid],
            {**env, "TERM": "xterm"},
            tmp_path,
        )
        term.expect("› ")
        await ui.call("turn.send", sessionId=sid, text="write it")
        asked = await ui.frame(lambda f: f.get("method") == "permission.requested")
        term.expect("Allow Write both.txt?")  # asked in both UIs
        request_id = asked["params"]["requestId"]
        await ui.call("permission.respond", requestId=request_id, decision="allow_once")
        term.expect("answered in another UI")
        term.expect("Wrote it.")
        assert (tmp_path / "both.txt").read_text() == "hi"
        term.type("/quit\n")  # the prompt still reads: nothing hangs on the question's line
        assert term.proc.wait(DEADLINE_S) == 0
    finally:
        if term is not None:
            term.close()
        await ui.close()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)


async def test_an_a2a_tasks_question_is_answered_by_a_ui_of_the_gateway(
    env: dict[str, str], home: Path
) -> None:
    import aiohttp

    ask = {"name": "ask_user", "arguments": {"question": "Which region?"}}
    (home / "script.json").write_text(json.dumps([{"toolCalls": [ask]}, {"text": "Deployed."}]))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "a2a": {"server": {"enabled": True, "token": A2A_TOKEN}},
        },
    )
    port = free_port()
    proc, _ = start(env, port)
    base = f"http://127.0.0.1:{port}"
    try:
        token = (home / "gateway.token").read_text().strip()
        async with aiohttp.ClientSession() as http:
            ws = await http.ws_connect(base + "/rpc", headers={"Authorization": f"Bearer {token}"})
            headers = {"Authorization": f"Bearer {A2A_TOKEN}", "A2A-Version": "1.0"}
            params = message("deploy") | {"configuration": {"returnImmediately": True}}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            async with http.post(base + "/a2a", json=body, headers=headers) as response:
                task_id = (await response.json())["result"]["task"]["id"]
            async with asyncio.timeout(DEADLINE_S):
                while True:
                    frame = json.loads((await ws.receive()).data)
                    if frame.get("method") == "question.asked":
                        break
            assert frame["params"]["text"] == "Which region?"
            # The UI watches the task's session: the turn's events reach it as a gateway turn's.
            watch = {"sessionId": frame["params"]["sessionId"]}
            await ws.send_json(
                {"jsonrpc": "2.0", "id": 6, "method": "session.subscribe", "params": watch}
            )
            answer = {"requestId": frame["params"]["requestId"], "answer": "eu-west"}
            await ws.send_str(
                json.dumps(
                    {"jsonrpc": "2.0", "id": 7, "method": "question.respond", "params": answer}
                )
            )
            get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
            async with asyncio.timeout(DEADLINE_S):
                while True:
                    async with http.post(base + "/a2a", json=get, headers=headers) as response:
                        task = (await response.json())["result"]
                    if task["status"]["state"] == "TASK_STATE_COMPLETED":
                        break
                    await asyncio.sleep(0.05)
            assert task["status"]["message"]["parts"][0]["text"] == "Deployed."
            seen: list[dict[str, Any]] = []
            async with asyncio.timeout(DEADLINE_S):
                while not any(e["type"] == "TurnEnded" for e in seen):
                    frame = json.loads((await ws.receive()).data)
                    if frame.get("method") == "session.event":
                        seen.append(frame["params"]["event"])
            assert "".join(e["text"] for e in seen if e["type"] == "AgentText") == "Deployed."
            await ws.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)


GATEWAY_KEY = "ghp_" + "R4v" * 10


async def drive_a_leaky_turn(base: str, token: str, cwd: Path) -> list[str]:
    """Every frame a UI gets over one turn that approves a command, then the session."""
    import aiohttp

    frames: list[str] = []
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(base + "/rpc", headers={"Authorization": f"Bearer {token}"}) as ws,
    ):
        ids = iter(range(1, 100))

        async def call(method: str, **params: Any) -> dict[str, Any]:
            request_id = next(ids)
            await ws.send_json(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            return await until(lambda f: f.get("id") == request_id)

        async def until(found: Any) -> dict[str, Any]:
            async with asyncio.timeout(DEADLINE_S):
                while True:
                    raw = await ws.receive_str()
                    frames.append(raw)
                    frame = json.loads(raw)
                    if found(frame):
                        return frame
                    if frame.get("method") == "permission.requested":
                        request_id = frame["params"]["requestId"]
                        await ws.send_json(
                            {
                                "jsonrpc": "2.0",
                                "id": 99,
                                "method": "permission.respond",
                                "params": {"requestId": request_id, "decision": "allow_once"},
                            }
                        )

        sid = (await call("session.create", cwd=str(cwd)))["result"]["sessionId"]
        await call("session.subscribe", sessionId=sid)
        await call("turn.send", sessionId=sid, text="show me")
        await until(
            lambda f: (
                f.get("method") == "session.event" and f["params"]["event"]["type"] == "TurnEnded"
            )
        )
        await call("session.get", sessionId=sid)
    return frames


def test_nothing_a_ui_is_sent_carries_a_recognised_key(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    command = f"echo {GATEWAY_KEY}"
    steps = [
        {
            "thought": f"the key is {GATEWAY_KEY}",
            "toolCalls": [
                {"name": "run_command", "arguments": {"command": command}},
                # A credential as a key of a call's input, not only as a value.
                {"name": "read_file", "arguments": {"path": "x", GATEWAY_KEY: 1}},
            ],
        },
        {"text": f"It printed {GATEWAY_KEY} and password=hunter2xyz"},
    ]
    (home / "script.json").write_text(json.dumps(steps))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    port = free_port()
    proc, _ = start(env, port)
    try:
        token = (home / "gateway.token").read_text().strip()
        frames = asyncio.run(drive_a_leaky_turn(f"http://127.0.0.1:{port}", token, tmp_path))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)
    seen = "\n".join(frames)
    assert "permission.requested" in seen and "ToolCallUpdated" in seen and "AgentText" in seen
    assert '"history"' in seen
    assert GATEWAY_KEY not in seen and "hunter2xyz" not in seen
    assert "[REDACTED]" in seen


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])


async def raw_subscriber(port: int, token: str, session_id: str) -> Any:
    """A WebSocket client on a raw socket that subscribes to a session, then reads nothing."""
    import base64
    import os
    import socket

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    await loop.sock_sendall(
        sock,
        (
            f"GET /rpc HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode(),
    )
    answer = await loop.sock_recv(sock, 1024)
    assert b" 101 " in answer and answer.endswith(b"\r\n\r\n")  # nothing else sent yet
    payload = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session.subscribe",
            "params": {"sessionId": session_id},
        }
    ).encode()
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    await loop.sock_sendall(sock, bytes([0x81, 0x80 | len(payload)]) + mask + masked)
    return sock


async def close_code(sock: Any) -> int | None:
    """Read everything the server sent to the end; the code of its close frame, if any."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    async with asyncio.timeout(DEADLINE_S):
        while chunk := await loop.sock_recv(sock, 1 << 20):
            data += chunk
    i = 0  # the handshake's answer was read already: a run of frames
    while i + 2 <= len(data):
        opcode, length = data[i] & 0x0F, data[i + 1] & 0x7F
        i += 2
        if length == 126:
            length, i = int.from_bytes(data[i : i + 2], "big"), i + 2
        elif length == 127:
            length, i = int.from_bytes(data[i : i + 8], "big"), i + 8
        if opcode == 0x8:
            return int.from_bytes(data[i : i + 2], "big")
        i += length
    return None


def test_a_ui_that_stops_reading_is_closed_1013_and_costs_the_gateway_little(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    words = " ".join("w" * 1000 + str(i) for i in range(16_000))  # 16 MB of answer
    (home / "script.json").write_text(json.dumps([{"text": words}] * 2))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})

    async def scenario(port: int, stall: bool) -> int | None:
        import aiohttp

        token = (home / "gateway.token").read_text().strip()
        auth = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(f"http://127.0.0.1:{port}/rpc", headers=auth) as ws,
        ):

            async def call(request_id: int, method: str, **params: Any) -> dict[str, Any]:
                await ws.send_json(
                    {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                )
                while True:
                    frame = json.loads((await ws.receive()).data)
                    if frame.get("id") == request_id:
                        return frame

            sid = (await call(1, "session.create", cwd=str(tmp_path)))["result"]["sessionId"]
            stalled = await raw_subscriber(port, token, sid) if stall else None
            await call(2, "system.hello")
            await call(3, "turn.send", sessionId=sid, text="talk")
            async with asyncio.timeout(120):
                while True:  # this UI keeps reading; the stalled one does not
                    frame = json.loads((await ws.receive()).data)
                    if frame.get("method") == "session.event":
                        if frame["params"]["event"]["type"] == "TurnEnded":
                            break
            if stalled is None:
                return None
            code = await close_code(stalled)
            stalled.close()
            return code

    peaks = []
    for stall in (False, True):  # the same turn, without and then with a UI that stalls
        port = free_port()
        proc, _ = start(env, port)
        try:
            code = asyncio.run(scenario(port, stall))
            peaks.append(peak_rss_kib(proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=DEADLINE_S)
    assert code == 1013
    assert peaks[1] - peaks[0] < 20 * 1024, peaks


async def test_port_0_serves_on_the_port_the_system_picked_and_says_which(
    env: dict[str, str], home: Path
) -> None:
    write_config(home, {"defaultModel": "echo"})
    proc, lines = start(env, 0)
    try:
        url = lines["gateway"].split()[0]
        port = int(url.rsplit(":", 1)[1])
        assert port != 0 and lines["login"].startswith(f"{url}/login?code=")
        assert httpx.get(url + "/health").json()["ok"] is True
        ui = await OtherUi.connect(home, port)  # the Host check knows the real port
        try:
            assert (await ui.call("system.hello"))["name"] == "raven"
        finally:
            await ui.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)

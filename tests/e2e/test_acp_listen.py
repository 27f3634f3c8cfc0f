"""`raven acp --listen`: ACP on a port of its own, driven by the official ACP SDK's
Streamable HTTP and WebSocket client transports as a remote editor drives them, behind
the token `raven acp token` prints; bad requests get their HTTP error and nothing else
is disturbed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import stat
import subprocess
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import acp
import httpx
import pytest
from acp.http.client import AcpHttpStatusError, create_http_stream
from acp.ws.client import create_websocket_stream

from tests.acp_schema import AcpSchema
from tests.conftest import RAVEN, raven, write_config
from tests.e2e.acp_harness import (
    WRITE_IT,
    Editor,
    Frames,
    remote_session,
    said,
    writes_remotely,
)
from tests.npm import npm_install
from tests.processes import pid_from

DEADLINE_S = 30.0
TS_SDK = "@agentclientprotocol/sdk@2.4.0"
MiB = 1024 * 1024


class Listening:
    """A running `raven acp --listen` and what it printed."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [*RAVEN, "acp", "--listen", "0", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.first = self.proc.stdout.readline()  # blocks until it listens, or exits
        assert self.first.startswith("acp: http://127.0.0.1:"), self.first + self.stop()[1]
        self.url = self.first.split()[1]
        self.token = raven("acp", "token", env=env).stdout.strip()
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.clients: list[httpx.AsyncClient] = []

    def client(self) -> httpx.AsyncClient:
        """An HTTP client sending the token (closed with the server: the SDK's transport
        leaves a client it was given open)."""
        made = httpx.AsyncClient(timeout=httpx.Timeout(DEADLINE_S, read=None), headers=self.auth)
        self.clients.append(made)
        return made

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=DEADLINE_S)
        return self.proc.returncode, err


@contextlib.asynccontextmanager
async def listening(env: dict[str, str]) -> AsyncIterator[Listening]:
    """`raven acp --listen` on the config as it is now; stopped cleanly at the end, its
    token in none of its logs."""
    server = Listening(env)
    try:
        yield server
    finally:
        for client in server.clients:
            await client.aclose()
        code, err = server.stop()
    assert code == 0, err
    assert server.token not in err
    logs = Path(env["RAVEN_HOME"]) / "logs"
    assert all(server.token not in p.read_text() for p in logs.iterdir())


def scripted(home: Path, steps: list[dict[str, Any]]) -> None:
    (home / "script.json").write_text(json.dumps(steps))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})


async def test_an_editor_drives_raven_over_streamable_http_with_the_sdk(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    pidfile = tmp_path / "sleeping.pid"
    sleeper = {"name": "run_command", "arguments": {"command": f"echo $$ > {pidfile}; sleep 60"}}
    scripted(home, [{"toolCalls": [WRITE_IT]}, {"text": "Written."}, {"toolCalls": [sleeper]}])
    async with listening(env) as server:
        assert "`raven acp token`" in server.proc.stdout.readline()  # type: ignore[union-attr]
        token_file = home / "acp.token"
        assert token_file.read_text().strip() == server.token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

        editor = Editor()
        editor.permission_answers = ["allow_once", "allow_once"]
        transport = create_http_stream(server.url, client=server.client())
        conn, frames, sid = await remote_session(editor, transport, tmp_path)
        await writes_remotely(conn, editor, sid, tmp_path)  # asked on a stream, answered by POST

        # Cancelled while its command runs: the command's group is stopped.
        running = asyncio.create_task(conn.prompt(session_id=sid, prompt=said("sleep")))
        await pid_from(pidfile)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(running, DEADLINE_S)).stop_reason == "cancelled"

        assert sid in [s.session_id for s in (await conn.list_sessions()).sessions]
        await conn.close_session(session_id=sid)
        frames.check(acp_schema)
        await transport.close()  # DELETE: the connection is gone

        # Another connection (an editor that reconnected) loads the session it left.
        later, frames = Editor(), Frames()
        again = create_http_stream(server.url, client=server.client())
        conn = acp.connect_to_agent(later, again, use_unstable_protocol=True, observers=[frames])
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
        await later.said(sid, "write itsleep", "user_message_chunk")
        await later.said(sid, "Written.")
        frames.check(acp_schema)
        await again.close()


async def test_an_editor_drives_raven_over_a_websocket_on_its_own_port(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    scripted(home, [{"text": "Hello from afar."}])
    async with listening(env) as server:
        socket = "ws" + server.url.removeprefix("http")
        assert socket in server.first  # printed, as an editor's settings need it
        editor = Editor()
        transport = await create_websocket_stream(socket, headers=server.auth)
        conn, frames, sid = await remote_session(editor, transport, tmp_path)
        assert (await conn.prompt(session_id=sid, prompt=said("hi"))).stop_reason == "end_turn"
        await editor.said(sid, "Hello from afar.")
        frames.check(acp_schema)
        await transport.close()


async def test_bad_clients_get_their_error_and_nothing_else_is_disturbed(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    write_config(home, {"defaultModel": "echo"})
    async with listening(env) as server:
        await refused_and_disturbing_nothing(server, tmp_path)


async def refused_and_disturbing_nothing(listening: Listening, tmp_path: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    async with httpx.AsyncClient(timeout=DEADLINE_S) as anyone:
        # Who may come in is decided before a body is read.
        assert (await anyone.post(listening.url, json=init)).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert (await anyone.post(listening.url, json=init, headers=wrong)).status_code == 401
        elsewhere = {**listening.auth, "Origin": "https://evil.example"}
        assert (await anyone.post(listening.url, json=init, headers=elsewhere)).status_code == 403
        rebound = {**listening.auth, "Host": "evil.example"}
        assert (await anyone.post(listening.url, json=init, headers=rebound)).status_code == 403
        nobody = create_http_stream(listening.url, client=anyone)
        refused = acp.connect_to_agent(Editor(), nobody)
        with pytest.raises(AcpHttpStatusError, match="401"):  # the SDK client without it
            await refused.initialize(protocol_version=1)
        await refused.close()
        await nobody.close()

    # A connection in use all along.
    editor = Editor()
    transport = create_http_stream(listening.url, client=listening.client())
    conn = acp.connect_to_agent(editor, transport, use_unstable_protocol=True)
    await conn.initialize(protocol_version=1)
    sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id

    async with httpx.AsyncClient(timeout=DEADLINE_S, headers=listening.auth) as http:
        made = await http.post(listening.url, json=init)
        assert made.status_code == 200 and made.json()["result"]["protocolVersion"] == 1
        cid = {"Acp-Connection-Id": made.headers["Acp-Connection-Id"]}
        bad_json = await http.post(
            listening.url, content=b"{nope", headers={**cid, "Content-Type": "application/json"}
        )
        assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == -32700
        text = await http.post(
            listening.url, content=b"hi", headers={**cid, "Content-Type": "text/plain"}
        )
        assert text.status_code == 415
        huge = {"jsonrpc": "2.0", "method": "x", "params": {"blob": "x" * (17 * MiB)}}
        assert (await http.post(listening.url, json=huge, headers=cid)).status_code == 413
        prompt = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/prompt",
            "params": {"sessionId": sid},
        }
        unnamed = await http.post(listening.url, json=prompt, headers=cid)
        assert unnamed.status_code == 400 and "Acp-Session-Id" in unnamed.json()["error"]
        other = await http.post(listening.url, json=prompt, headers={**cid, "Acp-Session-Id": sid})
        assert other.status_code == 404  # not a session of this connection
        lost = {"Acp-Connection-Id": "0" * 32}
        assert (await http.post(listening.url, json=prompt, headers=lost)).status_code == 404
        assert (await http.delete(listening.url, headers=lost)).status_code == 404
        assert (await http.delete(listening.url, headers=cid)).status_code == 202
        assert (await http.delete(listening.url, headers=cid)).status_code == 404

    answer = await conn.prompt(session_id=sid, prompt=said("still there?"))
    assert answer.stop_reason == "end_turn"
    await editor.said(sid, "still there?")
    await transport.close()


def test_listen_refuses_what_cannot_work(env: dict[str, str], home: Path) -> None:
    write_config(home, {"defaultModel": "echo"})
    outside = raven("acp", "--listen", "0.0.0.0:0", env=env)
    assert outside.returncode == 2 and "--allow-remote" in outside.stderr
    assert raven("acp", "--listen", "nope", env=env).returncode == 2
    assert raven("acp", "--listen", "0", "--model", "nope", env=env).returncode == 2


@pytest.fixture(scope="module")
def remote_editor(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TypeScript SDK editor script, beside the SDK and `ws` (Node 20 has no WebSocket
    client that sends headers)."""
    script = Path(__file__).parent / "remote_editor.mjs"
    folder = npm_install(tmp_path_factory, TS_SDK, "ws@8.23.1", beside=[script])
    return folder / script.name


@pytest.mark.parametrize("binding", ["http", "ws"])
async def test_the_typescript_sdks_client_transports_drive_raven(
    env: dict[str, str], home: Path, tmp_path: Path, remote_editor: Path, binding: str
) -> None:
    pidfile = tmp_path / "sleeping.pid"
    sleeper = {"name": "run_command", "arguments": {"command": f"echo $$ > {pidfile}; sleep 60"}}
    scripted(home, [{"toolCalls": [WRITE_IT]}, {"text": "Written."}, {"toolCalls": [sleeper]}])
    async with listening(env) as server:
        url = server.url if binding == "http" else "ws" + server.url.removeprefix("http")
        args = [binding, url, server.token, str(tmp_path), str(pidfile)]
        proc = await asyncio.create_subprocess_exec(
            "node", str(remote_editor), *args, stdout=PIPE, stderr=PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), DEADLINE_S * 2)
        assert proc.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["agent"] == "raven" and seen["stops"] == ["end_turn", "cancelled"]
    assert seen["listed"] and "remote.txt" in seen["permissions"][0]
    assert seen["answered"] == "Written."
    assert (tmp_path / "remote.txt").read_text() == "from afar"
    # The second connection's load replayed the conversation.
    assert seen["replayed"] == {
        "user_message_chunk": "write itsleep",
        "agent_message_chunk": "Written.",
    }

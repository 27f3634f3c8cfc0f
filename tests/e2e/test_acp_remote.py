"""ACP at the gateway's `/acp`, driven by the official ACP SDK's WebSocket and Streamable
HTTP client transports as a remote editor drives them: behind the gateway's token, on the
gateway's one runtime, with permissions asked over the socket."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import acp
import httpx
import pytest
from acp.http.client import create_http_stream
from acp.ws.client import create_websocket_stream
from websockets.exceptions import InvalidStatus

from tests.acp_schema import AcpSchema
from tests.conftest import write_config
from tests.e2e.acp_harness import WRITE_IT, Editor, remote_session, writes_remotely
from tests.e2e.test_gateway import DEADLINE_S, start
from tests.ports import free_port


async def test_an_editor_drives_raven_over_a_websocket_with_the_sdk(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    steps = [{"toolCalls": [WRITE_IT]}, {"text": "Written."}]
    (home / "script.json").write_text(json.dumps(steps))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    port = free_port()
    proc, lines = start(env, port)
    url = f"ws://127.0.0.1:{port}/acp"
    try:
        assert f"ACP on {url})" in lines["gateway"]  # where an editor connects, as printed
        token = (home / "gateway.token").read_text().strip()
        with pytest.raises(InvalidStatus) as refused:  # no token: refused before the upgrade
            await create_websocket_stream(url)
        assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as wrong:
            await create_websocket_stream(url, headers={"Authorization": "Bearer nope"})
        assert wrong.value.response.status_code == 401

        transport = await create_websocket_stream(url, headers={"Authorization": f"Bearer {token}"})
        editor = Editor()
        editor.permission_answers = ["allow_once"]
        conn, frames, sid = await remote_session(editor, transport, tmp_path)
        await writes_remotely(conn, editor, sid, tmp_path)  # asked over the socket
        frames.check(acp_schema)
        assert sid in [s.session_id for s in (await conn.list_sessions()).sessions]
        await transport.close()

        # Another connection (an editor that reconnected, over Streamable HTTP at the same
        # endpoint) loads the session it left.
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            again = create_http_stream("http" + url.removeprefix("ws"), client=http)
            later = Editor()
            conn = acp.connect_to_agent(later, again, use_unstable_protocol=True)
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            await later.said(sid, "write it", "user_message_chunk")
            await later.said(sid, "Written.")
            await again.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE_S)  # its pipes closed with it
        assert proc.returncode == 0

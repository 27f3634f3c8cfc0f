"""Raven RPC's Python client against a real gateway on loopback: answers parsed with the
contract's models, the gateway's errors as typed refusals with the contract's codes,
notifications parsed and in order, and a gateway that is not there or goes away."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from raven.rpc import contract as c
from raven.rpc.client import GatewayUnreachable, Refused, RpcClient
from tests.gateway.test_gateway import TOKEN, gateway  # noqa: F401 (the fixture)
from tests.ports import free_port

DEADLINE_S = 10


async def test_a_turn_through_the_client_parsed_with_the_contract(
    gateway: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    g = await gateway([{"text": "one two three", "wordDelayMs": 10}])
    notes: list[tuple[str, c.Wire]] = []
    ended = asyncio.Event()

    def on_note(method: str, note: c.Wire) -> None:
        notes.append((method, note))
        if isinstance(note, c.SessionEventNote) and note.event["type"] == "TurnEnded":
            ended.set()

    async with RpcClient.connect(g.base, TOKEN, on_note) as rpc:
        hello = await rpc.call("system.hello")
        assert isinstance(hello, c.Hello) and hello.rpc_version == c.RPC_VERSION
        info = await rpc.call("session.create", c.SessionCreate(cwd=str(tmp_path)))
        assert isinstance(info, c.SessionInfo) and info.cwd == str(tmp_path)
        await rpc.call("turn.send", c.TurnSend(session_id=info.session_id, text="count"))
        async with asyncio.timeout(DEADLINE_S):
            await ended.wait()

        events = [n for m, n in notes if isinstance(n, c.SessionEventNote)]
        assert events[0].event["type"] == "TurnStarted"  # in the order the gateway sent them
        seqs = [int(n.cursor.split(".")[1]) for n in events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        text = "".join(n.event["text"] for n in events if n.event["type"] == "AgentText")
        assert text == "one two three"

        with pytest.raises(Refused) as refused:
            await rpc.call("session.get", c.SessionGet(session_id="ses_nope"))
        assert refused.value.code == c.Code.SESSION_NOT_FOUND
        assert "ses_nope" in refused.value.reason
        again = c.SessionSubscribe(session_id=info.session_id, after="0000.1")
        with pytest.raises(Refused) as expired:
            await rpc.call("session.subscribe", again)
        assert expired.value.code == c.Code.CURSOR_EXPIRED


async def test_a_wrong_token_or_no_gateway_is_unreachable(gateway: Any) -> None:  # noqa: F811
    g = await gateway([])
    with pytest.raises(GatewayUnreachable, match="401"):
        async with RpcClient.connect(g.base, "wrong-token", lambda m, n: None):
            pass
    with pytest.raises(GatewayUnreachable, match="cannot reach"):
        async with RpcClient.connect(f"http://127.0.0.1:{free_port()}", TOKEN, lambda m, n: None):
            pass


async def test_a_gateway_that_goes_away_fails_the_waiting_call(
    gateway: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    g = await gateway([])
    async with RpcClient.connect(g.base, TOKEN, lambda m, n: None) as rpc:
        await rpc.call("system.hello")
        await g.server.close()
        with pytest.raises(GatewayUnreachable):
            await rpc.call("session.create", c.SessionCreate(cwd=str(tmp_path)))

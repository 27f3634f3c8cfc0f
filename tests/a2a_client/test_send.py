"""`send_message` against a peer on a2a-sdk's own Starlette routes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from raven.a2a_client.send import PeerError, send_message
from raven.config import A2AClientConfig, A2APeer
from tests.a2a_client.echo_peer import echo_peer
from tests.a2a_client.peer import Peer, start_peer, stop_peer

SECRET = "peer-credential-42"


@pytest.fixture
def peers() -> Iterator[tuple[Peer, Peer]]:
    listed, unlisted = start_peer(), start_peer()
    try:
        yield listed, unlisted
    finally:
        stop_peer(listed)
        stop_peer(unlisted)


def config_for(peer: Peer) -> list[A2APeer]:
    return [A2APeer(origin=peer.origin, credential=SECRET)]


SETTINGS = A2AClientConfig(timeout_s=10)


async def test_a_listed_origin_gets_the_credential_and_an_unlisted_one_none(
    peers: tuple[Peer, Peer],
) -> None:
    listed, unlisted = peers
    reply = await send_message(listed.card_url, "hello", config_for(listed), SETTINGS)
    assert reply.state == "completed" and reply.text == "peer says: hello"
    assert reply.task_id and reply.context_id
    assert listed.credentials_seen() and all(
        a == f"Bearer {SECRET}" for a in listed.credentials_seen()
    )
    other = await send_message(unlisted.card_url, "hi", config_for(listed), SETTINGS)
    assert other.text == "peer says: hi"
    assert unlisted.credentials_seen() and all(a is None for a in unlisted.credentials_seen())


async def test_origins_compare_scheme_host_and_default_port(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    spelled = [
        A2APeer(origin="HTTP://LOCALHOST.invalid:1", credential="no"),
        A2APeer(origin=f"http://127.0.0.1:{listed.port}/", credential=SECRET),
    ]
    await send_message(listed.card_url, "x", spelled, SETTINGS)
    assert listed.credentials_seen()[-1] == f"Bearer {SECRET}"


async def test_a_card_redirecting_elsewhere_is_refused_and_nothing_goes_there(
    peers: tuple[Peer, Peer],
) -> None:
    _listed, unlisted = peers
    bouncer = start_peer(redirect_to=unlisted.card_url)
    try:
        with pytest.raises(PeerError, match=f"redirects to {unlisted.card_url}"):
            await send_message(
                f"{bouncer.origin}/redirect-card", "hi", config_for(bouncer), SETTINGS
            )
        assert unlisted.seen == []
    finally:
        stop_peer(bouncer)


async def test_an_interface_on_another_origin_is_refused_before_sending(
    peers: tuple[Peer, Peer],
) -> None:
    _listed, unlisted = peers
    tricky = start_peer(foreign_rpc=f"{unlisted.origin}/a2a")
    try:
        with pytest.raises(PeerError, match="another origin"):
            await send_message(f"{tricky.origin}/foreign-card", "hi", config_for(tricky), SETTINGS)
        assert unlisted.seen == []
        assert [s.path for s in tricky.seen] == ["/foreign-card"]
    finally:
        stop_peer(tricky)


async def test_input_required_then_answered_with_a_second_call(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    asked = await send_message(listed.card_url, "ask", config_for(listed), SETTINGS)
    assert asked.state == "input-required" and asked.text == "What colour?"
    answered = await send_message(
        listed.card_url,
        "green",
        config_for(listed),
        SETTINGS,
        task_id=asked.task_id,
        context_id=asked.context_id,
    )
    assert answered.state == "completed"
    assert answered.text == "What colour?\n\nPainted it green."


async def test_failed_tasks_and_json_rpc_errors_are_clear(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    with pytest.raises(PeerError, match="ended failed: disk full"):
        await send_message(listed.card_url, "fail", config_for(listed), SETTINGS)
    with pytest.raises(PeerError, match="JSON-RPC error -32001"):
        await send_message(
            listed.card_url, "x", config_for(listed), SETTINGS, task_id="no-such-task"
        )


async def test_a_slow_peer_times_out(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    with pytest.raises(PeerError, match="did not answer within 1s"):
        await send_message(
            listed.card_url, "slow", config_for(listed), A2AClientConfig(timeout_s=1)
        )


async def test_an_oversized_response_is_not_read(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    with pytest.raises(PeerError, match="larger than"):
        await send_message(
            listed.card_url,
            "big",
            config_for(listed),
            A2AClientConfig(timeout_s=20, max_response_bytes=1024 * 1024),
        )


async def test_a_bare_message_reply(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    reply = await send_message(listed.card_url, "message", config_for(listed), SETTINGS)
    assert reply.state == "message" and reply.text == "just a message"


async def test_credentials_never_appear_in_errors(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    for text in ("fail", "slow"):
        with pytest.raises(PeerError) as info:
            await send_message(
                listed.card_url, text, config_for(listed), A2AClientConfig(timeout_s=1)
            )
        assert SECRET not in str(info.value)


async def test_unreachable_and_malformed_card_urls(peers: tuple[Peer, Peer]) -> None:
    with pytest.raises(PeerError, match="cannot reach"):
        await send_message("http://127.0.0.1:9/.well-known/agent-card.json", "x", [], SETTINGS)
    with pytest.raises(PeerError, match="http:// or https://"):
        await send_message("ftp://example.com/card", "x", [], SETTINGS)


async def test_a_card_without_a_json_rpc_interface_is_refused(peers: tuple[Peer, Peer]) -> None:
    listed, _ = peers
    with pytest.raises(PeerError, match="no JSON-RPC interface"):
        await send_message(f"{listed.origin}/grpc-card", "hi", config_for(listed), SETTINGS)
    assert [s.path for s in listed.seen] == ["/grpc-card"]


@pytest.mark.parametrize("kind", ["text", "ids"])
async def test_a_peer_echoing_our_credential_never_gets_it_past_the_reply(kind: str) -> None:
    with echo_peer() as peer:
        reply = await send_message(
            peer.card_url, kind, [A2APeer(origin=peer.origin, credential=SECRET)], SETTINGS
        )
    everything = json.dumps([reply.text, reply.task_id, reply.context_id, reply.raw]).lower()
    assert SECRET.lower() not in everything
    assert "***" in everything


@pytest.mark.parametrize("kind", ["error", "401"])
async def test_a_peer_echoing_our_credential_in_a_failure_never_gets_it_into_the_error(
    kind: str,
) -> None:
    with echo_peer() as peer, pytest.raises(PeerError) as info:
        await send_message(
            peer.card_url, kind, [A2APeer(origin=peer.origin, credential=SECRET)], SETTINGS
        )
    assert SECRET.lower() not in str(info.value).lower()


async def test_typed_parts_in_a_reply_are_saved_listed_or_shown(tmp_path: Path) -> None:
    with echo_peer() as peer:
        reply = await send_message(peer.card_url, "parts", [], SETTINGS, inbox=tmp_path / "inbox")
    assert reply.text.startswith("here are your results")
    # The data as the peer sent it: integers stay integers (even past a double's 2**53) and
    # keys keep their order, which the part's protobuf Struct would lose.
    block = '{\n  "zeta": 1,\n  "alpha": 2,\n  "big": 9007199254740993\n}'
    assert f"```json\n{block}\n```" in reply.text, reply.text
    (saved,) = (tmp_path / "inbox").rglob("*.txt")
    assert saved.name == "result.txt" and saved.read_bytes() == b"hello"
    assert saved.parent.parent == tmp_path / "inbox"  # <inbox>/<peer host>/, no escape
    assert any(line.startswith("file saved: ") for line in reply.received)
    assert "file by reference (not fetched): https://example.com/large.zip" in reply.received


async def test_a_file_with_a_very_long_name_is_saved_under_a_shorter_one(tmp_path: Path) -> None:
    with echo_peer() as peer:
        reply = await send_message(
            peer.card_url, "long-name", [], SETTINGS, inbox=tmp_path / "inbox"
        )
    (saved,) = (tmp_path / "inbox").rglob("*.txt")
    assert saved.read_bytes() == b"hello" and saved.name.startswith("rrrr")
    assert len(saved.name) <= 120
    assert any(saved.name in line for line in reply.received)


async def test_a_reply_nested_past_any_reader_is_a_clear_error() -> None:
    with echo_peer() as peer, pytest.raises(PeerError, match="nested too deeply"):
        await send_message(peer.card_url, "deep", [], SETTINGS)

from __future__ import annotations

import pytest

from raven.config import ModelSpec
from raven.messages import AssistantMessage, ToolCall, ToolResultMessage, user_text
from raven.providers import Finish, ModelRequest, TextDelta, ThoughtDelta, ToolCallReady, Usage
from raven.providers.anthropic import AnthropicProvider
from raven.providers.base import ProviderAuthError, ProviderProtocolError
from tests.fakes.model_server import FakeModelServer, Reply, anthropic_stream

KEY = "sk-ant-secret-999"


def provider(server: FakeModelServer) -> AnthropicProvider:
    spec = ModelSpec(
        id="claude", provider="anthropic", model="claude-test", base_url=server.url, api_key=KEY
    )
    return AnthropicProvider(spec, read_timeout_s=5)


async def collect(p: AnthropicProvider, messages: list | None = None) -> list[object]:  # type: ignore[type-arg]
    try:
        return [
            e
            async for e in p.stream(
                ModelRequest(system="sys", messages=messages or [user_text("hi")])
            )
        ]
    finally:
        await p.aclose()


async def test_text_and_thinking_stream(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(events=anthropic_stream(text="hello there", thinking="hmm")))
    events = await collect(provider(model_server))
    assert ThoughtDelta("hmm") in events
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there "
    assert Usage(12, 7) in events
    assert events[-1] == Finish("end_turn")
    sent = model_server.requests[0]
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.body["system"] == "sys" and sent.body["max_tokens"] > 0


async def test_tool_use_arguments_join_across_deltas(model_server: FakeModelServer) -> None:
    model_server.queue(
        Reply(
            events=anthropic_stream(
                text="let me look", tool_use=("toolu_1", "read_file", '{"path": "notes.md"}')
            )
        )
    )
    events = await collect(provider(model_server))
    (call,) = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert (call.id, call.name, call.arguments) == ("toolu_1", "read_file", {"path": "notes.md"})
    assert events[-1] == Finish("tool_use")


async def test_tool_results_go_back_as_user_tool_result_blocks(
    model_server: FakeModelServer,
) -> None:
    model_server.queue(Reply(events=anthropic_stream(text="done")))
    history = [
        user_text("go"),
        AssistantMessage(
            tool_calls=[
                ToolCall(id="t1", name="a", arguments={}),
                ToolCall(id="t2", name="b", arguments={}),
            ]
        ),
        ToolResultMessage(call_id="t1", name="a", content="one"),
        ToolResultMessage(call_id="t2", name="b", content="two", is_error=True),
    ]
    await collect(provider(model_server), history)
    wire = model_server.requests[0].body["messages"]
    assert len(wire) == 3
    assert [b["tool_use_id"] for b in wire[2]["content"]] == ["t1", "t2"]
    assert wire[2]["content"][1]["is_error"] is True


async def test_refusal_and_max_tokens_map(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(events=anthropic_stream(text="no", stop="refusal")))
    assert (await collect(provider(model_server)))[-1] == Finish("refusal")


async def test_401_never_shows_the_key(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(status=401, body='{"type":"error","error":{"message":"bad key"}}'))
    with pytest.raises(ProviderAuthError) as info:
        await collect(provider(model_server))
    assert "claude-test" in str(info.value) and KEY not in str(info.value)


async def test_cut_stream_is_a_protocol_error(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(events=anthropic_stream(text="a b c d")[:4], cut=True))
    with pytest.raises(ProviderProtocolError):
        await collect(provider(model_server))

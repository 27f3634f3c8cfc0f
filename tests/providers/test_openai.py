from __future__ import annotations

import pytest

from raven.config import ModelSpec
from raven.messages import AssistantMessage, ToolCall, ToolResultMessage, user_text
from raven.providers import (
    ContextTooLong,
    Finish,
    ModelRequest,
    ProviderError,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from raven.providers.base import ProviderAuthError, ProviderNotFoundError, ProviderProtocolError
from raven.providers.openai import OpenAIProvider
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream

KEY = "sk-test-secret-key-123456"
TOOLS = [ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})]


def provider(server: FakeModelServer) -> OpenAIProvider:
    spec = ModelSpec(
        id="gpt",
        provider="openai",
        model="gpt-test",
        base_url=server.url + "/v1",
        api_key=KEY,
        context_window=1000,
    )
    return OpenAIProvider(spec, read_timeout_s=5)


async def collect(p: OpenAIProvider, request: ModelRequest | None = None) -> list[object]:
    request = request or ModelRequest(system="sys", messages=[user_text("hi")], tools=TOOLS)
    try:
        return [e async for e in p.stream(request)]
    finally:
        await p.aclose()


async def test_text_streams_in_chunks_with_usage(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(events=openai_stream(text="hello brave world", usage=(11, 3))))
    events = await collect(provider(model_server))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello brave world "
    assert len([e for e in events if isinstance(e, TextDelta)]) == 3
    assert Usage(11, 3) in events
    assert events[-1] == Finish("end_turn")
    sent = model_server.requests[0]
    assert sent.headers["Authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "gpt-test" and sent.body["stream"] is True
    assert sent.body["messages"][0] == {"role": "system", "content": "sys"}
    assert sent.body["tools"][0]["function"]["name"] == "read_file"


async def test_parallel_tool_calls_are_joined_across_chunks(model_server: FakeModelServer) -> None:
    model_server.queue(
        Reply(
            events=openai_stream(
                tool_calls=[
                    ("call_a", "read_file", '{"path": "a.txt"}'),
                    ("call_b", "read_file", '{"path": "b.txt", "start_line": 2}'),
                ]
            )
        )
    )
    events = await collect(provider(model_server))
    calls = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_a", "read_file", {"path": "a.txt"}),
        ("call_b", "read_file", {"path": "b.txt", "start_line": 2}),
    ]
    assert events[-1] == Finish("tool_use")


async def test_history_with_tool_results_goes_out_in_openai_shape(
    model_server: FakeModelServer,
) -> None:
    model_server.queue(Reply(events=openai_stream(text="ok")))
    history = [
        user_text("read it"),
        AssistantMessage(tool_calls=[ToolCall(id="c1", name="read_file", arguments={"path": "x"})]),
        ToolResultMessage(call_id="c1", name="read_file", content="data"),
    ]
    await collect(provider(model_server), ModelRequest(system="s", messages=history))
    wire = model_server.requests[0].body["messages"]
    assert wire[2]["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": '{"path": "x"}',
    }
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "data"}


@pytest.mark.parametrize(
    "finish, expected", [("length", "max_tokens"), ("content_filter", "refusal")]
)
async def test_finish_reasons_map_to_stop_reasons(
    model_server: FakeModelServer, finish: str, expected: str
) -> None:
    model_server.queue(Reply(events=openai_stream(text="partial", finish=finish)))
    events = await collect(provider(model_server))
    assert events[-1] == Finish(expected)  # type: ignore[arg-type]


async def test_401_names_model_and_url_but_never_the_key(model_server: FakeModelServer) -> None:
    model_server.queue(
        Reply(status=401, body=f'{{"error":{{"message":"Incorrect API key {KEY}"}}}}')
    )
    with pytest.raises(ProviderAuthError) as info:
        await collect(provider(model_server))
    message = str(info.value)
    assert "gpt-test" in message and model_server.url in message and "401" in message
    assert KEY not in message


async def test_404_says_check_the_model_name(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(status=404, body='{"error":{"message":"model not found"}}'))
    with pytest.raises(ProviderNotFoundError, match="check the model name and baseUrl"):
        await collect(provider(model_server))


async def test_429_is_retried_honouring_retry_after(model_server: FakeModelServer) -> None:
    model_server.queue(
        Reply(status=429, headers={"Retry-After": "0"}, body='{"error":{"message":"slow"}}'),
        Reply(events=openai_stream(text="finally")),
    )
    events = await collect(provider(model_server))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["finally "]
    assert len(model_server.requests) == 2


@pytest.mark.parametrize("status", [408, 502, 503, 504])
async def test_transient_statuses_are_retried_then_reported(
    status: int, model_server: FakeModelServer
) -> None:
    broken = Reply(
        status=status,
        headers={"Retry-After": "0"},
        body='{"error":{"message":"upstream exploded"}}',
    )
    model_server.queue(broken, broken, broken, broken)
    with pytest.raises(ProviderError, match=rf"^upstream exploded \(HTTP {status} from model"):
        await collect(provider(model_server))
    assert len(model_server.requests) == 4


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (
            500,
            '{"error":{"code":500,"message":"messages.2.content: Input should be a valid string"}}',
            "messages.2.content: Input should be a valid string (HTTP 500",
        ),
        (400, '{"error":{"message":"' + "bad request " * 100 + '"}}', "bad request bad request"),
        (
            422,
            '{"detail":[{"loc":["body","messages",2],"msg":"field required"}]}',
            "body.messages.2: field required (HTTP 422",
        ),
    ],
)
async def test_requests_that_cannot_succeed_are_reported_once_and_short(
    status: int, body: str, says: str, model_server: FakeModelServer
) -> None:
    model_server.queue(Reply(status=status, body=body))
    with pytest.raises(ProviderError) as info:
        await collect(provider(model_server))
    message = str(info.value)
    assert message.startswith(says) and len(message) < 420 and "\n" not in message
    assert len(model_server.requests) == 1


def test_an_unset_api_key_env_is_warned_about_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("RAVEN_TEST_UNSET_KEY", raising=False)
    spec = ModelSpec(
        id="local",
        provider="openai",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="RAVEN_TEST_UNSET_KEY",
    )
    for _ in range(2):
        OpenAIProvider(spec, read_timeout_s=5)
    warnings = [r for r in caplog.records if "RAVEN_TEST_UNSET_KEY" in r.getMessage()]
    assert len(warnings) == 1 and '"apiKey": "none"' in warnings[0].getMessage()


async def test_no_key_goes_to_a_server_it_was_not_named_for(
    model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-for-openai-only")
    for key in (None, "none"):
        spec = ModelSpec(
            id="local", provider="openai", base_url=model_server.url + "/v1", api_key=key
        )
        model_server.queue(Reply(events=openai_stream(text="ok")))
        await collect(OpenAIProvider(spec, read_timeout_s=5))
    assert all("Authorization" not in r.headers for r in model_server.requests)
    assert not caplog.records


async def test_garbage_sse_is_a_protocol_error(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(events=["data: {not json at all"]))
    with pytest.raises(ProviderProtocolError, match="not JSON"):
        await collect(provider(model_server))


async def test_stream_cut_midway_is_a_protocol_error(model_server: FakeModelServer) -> None:
    events = openai_stream(text="one two three four")[:3]
    model_server.queue(Reply(events=events, cut=True))
    with pytest.raises(ProviderProtocolError):
        await collect(provider(model_server))


async def test_stream_ending_without_finish_is_a_protocol_error(
    model_server: FakeModelServer,
) -> None:
    model_server.queue(Reply(events=openai_stream(text="one two")[:2]))
    with pytest.raises(ProviderProtocolError, match="before the model finished"):
        await collect(provider(model_server))


async def test_unreachable_server_is_reported_after_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("raven.providers.http.BACKOFF_BASE_S", 0.0)
    spec = ModelSpec(id="gpt", provider="openai", base_url="http://127.0.0.1:9/v1", api_key="k")
    with pytest.raises(ProviderError, match="cannot connect"):
        await collect(OpenAIProvider(spec, read_timeout_s=5))


@pytest.mark.parametrize(
    ("body", "window"),
    [
        (  # llama.cpp's server
            '{"error":{"code":400,"message":"the request exceeds the available context size,'
            ' try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4100,'
            '"n_ctx":4096}}',
            4096,
        ),
        (  # OpenAI
            '{"error":{"message":"This model\'s maximum context length is 128000 tokens. '
            'However, your messages resulted in 130000 tokens.","type":"invalid_request_error",'
            '"param":"messages","code":"context_length_exceeded"}}',
            128000,
        ),
        (  # Anthropic
            '{"type":"error","error":{"type":"invalid_request_error",'
            '"message":"prompt is too long: 215000 tokens > 200000 maximum"}}',
            200000,
        ),
        (  # a server that says so without the size
            '{"error":{"message":"Input exceeds the context window of the model"}}',
            None,
        ),
    ],
)
async def test_a_request_past_the_window_is_told_apart_with_the_window_the_server_names(
    body: str, window: int | None, model_server: FakeModelServer
) -> None:
    model_server.queue(Reply(status=400, body=body))
    with pytest.raises(ContextTooLong) as info:
        await collect(provider(model_server))
    assert info.value.window == window


async def test_another_bad_request_is_no_context_refusal(model_server: FakeModelServer) -> None:
    model_server.queue(Reply(status=400, body='{"error":{"message":"unknown field: tools"}}'))
    with pytest.raises(ProviderError) as info:
        await collect(provider(model_server))
    assert not isinstance(info.value, ContextTooLong)

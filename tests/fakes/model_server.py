"""A real HTTP server on loopback speaking the OpenAI (Chat Completions and Responses) and
Anthropic streaming wire formats.

Each test queues replies; the server records every request it gets. Runs in a
thread with its own event loop so that both async tests and subprocesses can use it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

HOLD_S = 30.0
"""How long a held reply waits at most."""


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str | None = None
    """A plain body (for errors); None means `events` as SSE."""
    events: list[str] = field(default_factory=list)
    """Raw SSE blocks, each written followed by a blank line."""
    cut: bool = False
    """Close the connection abruptly after the events."""
    delay_s: float = 0.0
    held_until: threading.Event | None = None
    """Sent once this is set (another request came, say), or after `HOLD_S`."""
    event_delay_s: float = 0.0
    """A pause before each event after the first, to stream like a slow model."""


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeModelServer:
    def __init__(self) -> None:
        self.replies: list[Reply | Callable[[dict[str, Any]], Reply]] = []
        """Replies in order; a callable builds its reply from the request body."""
        self.requests: list[Recorded] = []
        self.context_tokens: int | None = None
        """A Chat Completions request larger than this (4 characters a token) is refused
        as llama.cpp refuses one that passes its context size."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeModelServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def queue(self, *replies: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        self.replies.extend(replies)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/v1/responses", self._handle)
        # Gemini's API: `models/NAME:generateContent` and `:streamGenerateContent?alt=sse`.
        app.router.add_post("/v1beta/models/{call}", self._handle)
        # A real model server stops generating when its client hangs up.
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _models(self, request: web.Request) -> web.StreamResponse:
        """`GET /v1/models` as llama.cpp and Ollama answer it: the one model served."""
        model = {"id": "fake-model", "object": "model", "owned_by": "local"}
        return web.json_response({"object": "list", "data": [model]})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(Recorded(request.path, dict(request.headers), body))
        if request.path.endswith("/chat/completions") and (problem := strict_chat_check(body)):
            # What llama.cpp's OpenAI-compatible server answers for a message it will not take.
            error = {"error": {"code": 500, "message": problem, "type": "server_error"}}
            return web.Response(status=500, text=json.dumps(error), content_type="application/json")
        if request.path.endswith("/chat/completions") and self.context_tokens is not None:
            size = request_tokens(body)
            if size > self.context_tokens:
                error = {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": size,
                    "n_ctx": self.context_tokens,
                }
                return web.json_response({"error": error}, status=400)
        if request.path.endswith("/responses") and (problem := strict_responses_check(body)):
            # What OpenAI's Responses API answers for an input it will not take.
            error = {"error": {"message": problem, "type": "invalid_request_error", "code": None}}
            return web.Response(status=400, text=json.dumps(error), content_type="application/json")
        if not self.replies:
            return web.Response(status=500, text='{"error":{"message":"no reply queued"}}')
        reply = self.replies.pop(0)
        if callable(reply):
            reply = reply(body)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.held_until is not None:
            held = reply.held_until.wait
            await asyncio.get_running_loop().run_in_executor(None, held, HOLD_S)
        if reply.body is None and request.path.endswith(":generateContent"):
            # Gemini's unary call answers with the one response its stream would carry.
            (event,) = reply.events
            return web.json_response(json.loads(event.removeprefix("data: ")))
        if reply.body is not None:
            return web.Response(
                status=reply.status,
                text=reply.body,
                headers=reply.headers,
                content_type="application/json",
            )
        response = web.StreamResponse(status=reply.status, headers=reply.headers)
        response.content_type = "text/event-stream"
        await response.prepare(request)
        for index, block in enumerate(reply.events):
            if index and reply.event_delay_s:
                await asyncio.sleep(reply.event_delay_s)
            await response.write(block.encode() + b"\n\n")
        if reply.cut:
            assert request.transport is not None
            request.transport.abort()
            return response
        await response.write_eof()
        return response


def request_tokens(body: dict[str, Any]) -> int:
    """A Chat Completions request's size as the fake counts it: 4 characters a token of
    its messages and tools as JSON."""
    chars = len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("tools", [])))
    return chars // 4


def strict_chat_check(body: dict[str, Any]) -> str | None:
    """The first message llama-cpp-python's server rejects, as its error text; None if all pass.

    It validates each message with pydantic: `content` must be present and a string
    (a list of parts for user messages); a null beside `tool_calls` is refused. A tool
    result must answer a call made before it in the request (as OpenAI's API requires).
    """
    called: set[str] = set()
    for i, msg in enumerate(body.get("messages", [])):
        called |= {c.get("id") for c in msg.get("tool_calls") or []}
        if msg.get("role") == "tool" and msg.get("tool_call_id") not in called:
            # OpenAI's words; llama.cpp's chat templates refuse it as well.
            return (
                f"messages.{i}: messages with role 'tool' must be a response to a preceding"
                " message with 'tool_calls'"
            )
        content = msg.get("content", ...)
        if content is ...:
            return f"messages.{i}.content: Field required"
        if msg.get("role") == "user" and isinstance(content, list):
            continue
        if not isinstance(content, str):
            return f"messages.{i}.content: Input should be a valid string"
        if msg.get("role") == "tool" and not isinstance(msg.get("tool_call_id"), str):
            return f"messages.{i}.tool_call_id: Field required"
    return None


def strict_responses_check(body: dict[str, Any]) -> str | None:
    """What OpenAI's Responses API refuses in a request, as its error text; None if it takes it.

    `model` and `input` are required, and a `function_call_output` (`custom_tool_call_output`)
    must answer a `function_call` (`custom_tool_call`) earlier in the same input (the API
    keeps no state when `store` is off).
    """
    if not isinstance(body.get("model"), str):
        return "Missing required parameter: 'model'."
    items = body.get("input")
    if not isinstance(items, (list, str)):
        return "Missing required parameter: 'input'."
    calls: set[tuple[str, str]] = set()
    for item in items if isinstance(items, list) else ():
        kind, call_id = item.get("type"), str(item.get("call_id"))
        if kind in ("function_call", "custom_tool_call"):
            calls.add((kind, call_id))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            if (kind.removesuffix("_output"), call_id) not in calls:
                said = kind.replace("_", " ")
                return f"No tool call found for {said} with call_id {call_id}."
    return None


def responses_stream(
    text: str = "",
    function_call: tuple[str, str, str] | None = None,
    custom_call: tuple[str, str, str] | None = None,
    namespace: str | None = None,
) -> list[str]:
    """SSE blocks of a Responses API stream, as OpenAI sends them: an assistant message
    streamed a word a delta, one `function_call` item (call id, name, JSON arguments; of a
    tool in `namespace`, if given), or one `custom_tool_call` item (call id, name,
    free-form input: codex's `exec`)."""
    blocks: list[str] = []

    def ev(name: str, **data: Any) -> None:
        payload = {"type": name, "sequence_number": len(blocks), **data}
        blocks.append(f"event: {name}\ndata: {json.dumps(payload)}")

    response: dict[str, Any] = {"id": "resp_1", "object": "response", "status": "in_progress"}
    ev("response.created", response=response)
    ev("response.in_progress", response=response)
    item: dict[str, Any]
    if function_call:
        call_id, name, args = function_call
        item = {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name}
        if namespace is not None:
            item["namespace"] = namespace
        at = {"item_id": "fc_1", "output_index": 0}
        ev("response.output_item.added", output_index=0, item={**item, "arguments": ""})
        ev("response.function_call_arguments.delta", **at, delta=args)
        ev("response.function_call_arguments.done", **at, arguments=args)
        item = {**item, "arguments": args, "status": "completed"}
    elif custom_call:
        call_id, name, code = custom_call
        item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": call_id, "name": name}
        at = {"item_id": "ctc_1", "output_index": 0}
        ev("response.output_item.added", output_index=0, item={**item, "input": ""})
        ev("response.custom_tool_call_input.delta", **at, delta=code)
        ev("response.custom_tool_call_input.done", **at, input=code)
        item = {**item, "input": code, "status": "completed"}
    else:
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"type": "message", "id": "msg_1", "role": "assistant"}
        at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
        ev("response.output_item.added", output_index=0, item={**item, "content": []})
        ev("response.content_part.added", **at, part=part)
        words = text.split(" ")
        for delta in words[:1] + [" " + word for word in words[1:]]:
            ev("response.output_text.delta", **at, delta=delta)
        ev("response.output_text.done", **at, text=text)
        ev("response.content_part.done", **at, part={**part, "text": text})
        item = {**item, "status": "completed", "content": [{**part, "text": text}]}
    ev("response.output_item.done", output_index=0, item=item)
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    done = {**response, "status": "completed", "output": [item], "usage": usage}
    ev("response.completed", response=done)
    return blocks


def openai_stream(
    text: str = "",
    tool_calls: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    finish: str | None = None,
    usage: tuple[int, int] | None = (10, 5),
    done: bool = True,
    chunk_chars: int = 0,
) -> list[str]:
    """SSE blocks of a Chat Completions stream: text a word a chunk (or `chunk_chars`
    characters a chunk, as models stream sub-word tokens); tool-call arguments in two."""
    blocks = []

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return "data: " + json.dumps(
            {"id": "c1", "object": "chat.completion.chunk", "choices": [choice]}
        )

    blocks.append(chunk({"role": "assistant", "content": ""}))
    if chunk_chars:
        pieces = [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    else:
        pieces = [word + " " for word in text.split(" ")] if text else []
    for piece in pieces:
        blocks.append(chunk({"content": piece}))
    for index, (call_id, name, args) in enumerate(tool_calls):
        half = len(args) // 2
        blocks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": args[:half]},
                        }
                    ]
                }
            )
        )
        blocks.append(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": args[half:]}}]})
        )
    reason = finish or ("tool_calls" if tool_calls else "stop")
    blocks.append(chunk({}, reason))
    if usage:
        blocks.append(
            "data: "
            + json.dumps(
                {
                    "id": "c1",
                    "choices": [],
                    "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
                }
            )
        )
    if done:
        blocks.append("data: [DONE]")
    return blocks


def anthropic_stream(
    text: str = "",
    thinking: str = "",
    tool_use: tuple[str, str, str] | None = None,
    stop: str | None = None,
) -> list[str]:
    def ev(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}"

    # The message as Anthropic's API starts it: Claude Code's SDK accumulates into `content`.
    message = {
        "id": "msg_fake1",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    blocks = [ev("message_start", {"message": message})]
    index = 0
    if thinking:
        blocks.append(
            ev("content_block_start", {"index": index, "content_block": {"type": "thinking"}})
        )
        blocks.append(
            ev(
                "content_block_delta",
                {"index": index, "delta": {"type": "thinking_delta", "thinking": thinking}},
            )
        )
        blocks.append(ev("content_block_stop", {"index": index}))
        index += 1
    if text:
        blocks.append(
            ev(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
        )
        for word in text.split(" "):
            blocks.append(
                ev(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": word + " "}},
                )
            )
        blocks.append(ev("content_block_stop", {"index": index}))
        index += 1
    if tool_use:
        call_id, name, args = tool_use
        blocks.append(
            ev(
                "content_block_start",
                {
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
        )
        half = len(args) // 2
        for part in (args[:half], args[half:]):
            blocks.append(
                ev(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": part}},
                )
            )
        blocks.append(ev("content_block_stop", {"index": index}))
    blocks.append('event: ping\ndata: {"type": "ping"}')
    reason = stop or ("tool_use" if tool_use else "end_turn")
    blocks.append(
        ev(
            "message_delta",
            {
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        )
    )
    blocks.append(ev("message_stop", {}))
    return blocks


def gemini_stream(text: str = "", call: tuple[str, dict[str, Any]] | None = None) -> list[str]:
    """One `GenerateContentResponse` as Gemini's API streams it (`alt=sse`): the model's
    text, or a function call, finished."""
    part: dict[str, Any] = {"text": text}
    if call is not None:
        part = {"functionCall": {"name": call[0], "args": call[1]}}
    response = {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 13},
        "modelVersion": "gemini-fake",
    }
    return [f"data: {json.dumps(response)}"]

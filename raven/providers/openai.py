"""OpenAI-compatible Chat Completions, streamed over SSE.

Serves OpenAI and the servers that copy its wire (Ollama, vLLM, llama.cpp,
LM Studio, OpenRouter). Maps neutral messages to that wire and back; nothing else.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from raven.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolResultMessage,
    UserMessage,
)
from raven.providers.base import (
    Finish,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ProviderError,
    ProviderProtocolError,
    TextDelta,
    ThoughtDelta,
    ToolCallAssembler,
    ToolCallReady,
    ToolSpec,
    Usage,
)
from raven.providers.http import HttpProvider, decode_json, post_sse

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_FINISH: dict[str, FinishReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class OpenAIProvider(HttpProvider):
    default_base_url = DEFAULT_BASE_URL
    default_key_env = "OPENAI_API_KEY"

    def headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body: dict[str, Any] = {
            "model": self._spec.vendor_model,
            "messages": to_wire_messages(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = _wire_tools(request.tools)
        max_tokens = request.max_tokens or self._spec.max_tokens
        if max_tokens:
            body["max_tokens"] = max_tokens
        calls = ToolCallAssembler()
        finish: FinishReason | None = None
        async for sse in post_sse(self._client, "chat/completions", body, self._endpoint):
            if sse.data.strip() == "[DONE]":
                break
            chunk = decode_json(sse.data, self._endpoint)
            if "error" in chunk:
                raise ProviderError(f"{self._endpoint.label()}: {_stream_error(chunk['error'])}")
            usage = chunk.get("usage")
            if isinstance(usage, dict):
                yield Usage(
                    input_tokens=int(usage.get("prompt_tokens") or 0),
                    output_tokens=int(usage.get("completion_tokens") or 0),
                )
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(thought, str) and thought:
                    yield ThoughtDelta(thought)
                if isinstance(delta.get("content"), str) and delta["content"]:
                    yield TextDelta(delta["content"])
                for frag in delta.get("tool_calls") or []:
                    fn = frag.get("function") or {}
                    calls.add(
                        int(frag.get("index", 0)),
                        frag.get("id"),
                        fn.get("name"),
                        fn.get("arguments") or "",
                    )
                if choice.get("finish_reason"):
                    finish = _FINISH.get(choice["finish_reason"], "end_turn")
        if finish is None:
            raise ProviderProtocolError(
                f"{self._endpoint.label()}: the stream ended before the model finished"
            )
        ready = calls.finish()
        for call in ready:
            yield ToolCallReady(call)
        if ready and finish == "end_turn":
            finish = "tool_use"
        yield Finish(finish)


def to_wire_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for msg in messages:
        if isinstance(msg, UserMessage):
            wire.append({"role": "user", "content": _user_content(msg)})
        elif isinstance(msg, AssistantMessage):
            # "" rather than null: llama.cpp's server rejects null content beside tool_calls
            # (and omitting the key breaks its chat templates); OpenAI, vLLM and Ollama take "".
            item: dict[str, Any] = {"role": "assistant", "content": msg.text}
            if msg.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": c.raw_arguments or json.dumps(c.arguments),
                        },
                    }
                    for c in msg.tool_calls
                ]
            wire.append(item)
        elif isinstance(msg, ToolResultMessage):
            text = msg.content + "".join(
                f"\n[image {i.mime_type} not shown: this API takes no images in tool results]"
                for i in msg.images
            )
            wire.append({"role": "tool", "tool_call_id": msg.call_id, "content": text})
    return wire


def _user_content(msg: UserMessage) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in msg.parts):
        return msg.text
    content: list[dict[str, Any]] = []
    for part in msg.parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            url = f"data:{part.mime_type};base64,{part.data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def _wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _stream_error(error: Any) -> str:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"][:300]
    return "the model reported an error mid-stream"

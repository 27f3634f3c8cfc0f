"""Anthropic Messages, streamed over SSE: text, tool_use/tool_result, thinking as thoughts.

Maps neutral messages to the Messages wire and back; nothing else.
"""

from __future__ import annotations

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
    Usage,
)
from raven.providers.http import HttpProvider, decode_json, post_sse

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
_FINISH: dict[str, FinishReason] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
}


class AnthropicProvider(HttpProvider):
    default_base_url = DEFAULT_BASE_URL
    default_key_env = "ANTHROPIC_API_KEY"

    def headers(self, key: str) -> dict[str, str]:
        return {"anthropic-version": API_VERSION, **({"x-api-key": key} if key else {})}

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        body: dict[str, Any] = {
            "model": self._spec.vendor_model,
            "system": request.system,
            "messages": to_wire_messages(request.messages),
            "max_tokens": request.max_tokens or self._spec.max_tokens or DEFAULT_MAX_TOKENS,
            "stream": True,
        }
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        calls = ToolCallAssembler()
        usage = Usage()
        finish: FinishReason | None = None
        async for sse in post_sse(self._client, "v1/messages", body, self._endpoint):
            data = decode_json(sse.data, self._endpoint)
            kind = data.get("type")
            if kind == "error":
                message = (data.get("error") or {}).get("message", "error mid-stream")
                raise ProviderError(f"{self._endpoint.label()}: {str(message)[:300]}")
            if kind == "message_start":
                u = (data.get("message") or {}).get("usage") or {}
                usage = Usage(input_tokens=int(u.get("input_tokens") or 0))
            elif kind == "content_block_start":
                block = data.get("content_block") or {}
                if block.get("type") == "tool_use":
                    calls.add(int(data.get("index", 0)), block.get("id"), block.get("name"), "")
            elif kind == "content_block_delta":
                delta = data.get("delta") or {}
                dkind = delta.get("type")
                if dkind == "text_delta" and delta.get("text"):
                    yield TextDelta(delta["text"])
                elif dkind == "thinking_delta" and delta.get("thinking"):
                    yield ThoughtDelta(delta["thinking"])
                elif dkind == "input_json_delta":
                    calls.add(int(data.get("index", 0)), None, None, delta.get("partial_json", ""))
            elif kind == "message_delta":
                stop = (data.get("delta") or {}).get("stop_reason")
                if stop:
                    finish = _FINISH.get(stop, "end_turn")
                out = (data.get("usage") or {}).get("output_tokens")
                if out is not None:
                    usage = Usage(input_tokens=usage.input_tokens, output_tokens=int(out))
            elif kind == "message_stop":
                break
        if finish is None:
            raise ProviderProtocolError(
                f"{self._endpoint.label()}: the stream ended before the model finished"
            )
        yield usage
        for call in calls.finish():
            yield ToolCallReady(call)
        yield Finish(finish)


def to_wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Anthropic turns; consecutive tool results share one user turn."""
    wire: list[dict[str, Any]] = []
    for msg in messages:
        if isinstance(msg, UserMessage):
            wire.append({"role": "user", "content": [_user_block(p) for p in msg.parts]})
        elif isinstance(msg, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            if msg.text:
                blocks.append({"type": "text", "text": msg.text})
            for call in msg.tool_calls:
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            wire.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})
        elif isinstance(msg, ToolResultMessage):
            content: str | list[dict[str, Any]] = msg.content
            if msg.images:
                content = [{"type": "text", "text": msg.content}]
                content += [_user_block(image) for image in msg.images]
            block = {
                "type": "tool_result",
                "tool_use_id": msg.call_id,
                "content": content,
                "is_error": msg.is_error,
            }
            if wire and wire[-1]["role"] == "user" and _is_tool_results(wire[-1]):
                wire[-1]["content"].append(block)
            else:
                wire.append({"role": "user", "content": [block]})
    return wire


def _is_tool_results(turn: dict[str, Any]) -> bool:
    return all(b.get("type") == "tool_result" for b in turn["content"])


def _user_block(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
        }
    return {"type": "text", "text": part.text}

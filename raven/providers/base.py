"""The streaming interface every model adapter implements, and its typed errors.

ProviderError                  a model call failed; the message names model and URL
├── ProviderAuthError          401/403: the key was refused (the key is never shown)
├── ProviderNotFoundError      404: wrong model name or base URL
├── ContextTooLong             the request passed the model's context window
└── ProviderProtocolError      the stream was cut or could not be understood
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from raven.errors import RavenError
from raven.messages import Message, ToolCall

FinishReason = Literal["end_turn", "tool_use", "max_tokens", "refusal"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    """A JSON schema for the arguments object."""


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int | None = None


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThoughtDelta:
    text: str


@dataclass(frozen=True)
class ToolCallReady:
    call: ToolCall


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    """Counted by Raven (a model that counts nothing, such as the offline ones), not the
    server."""


@dataclass(frozen=True)
class Finish:
    reason: FinishReason


ModelEvent = TextDelta | ThoughtDelta | ToolCallReady | Usage | Finish


class Provider(Protocol):
    """One configured model. `stream` yields events and ends with exactly one `Finish`."""

    @property
    def model_id(self) -> str: ...

    @property
    def context_window(self) -> int | None: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...

    async def aclose(self) -> None: ...


class ProviderError(RavenError):
    """A model call failed in a way a person can act on."""


class ProviderAuthError(ProviderError):
    pass


class ProviderNotFoundError(ProviderError):
    pass


class ProviderProtocolError(ProviderError):
    pass


class ContextTooLong(ProviderError):
    """The server refused the request for passing the model's context window; `window`
    is the window in tokens where the server said it (llama.cpp's `n_ctx`, OpenAI's and
    Anthropic's messages)."""

    def __init__(self, message: str, window: int | None) -> None:
        super().__init__(message)
        self.window = window


@dataclass
class ToolCallAssembler:
    """Joins tool-call fragments that arrive across stream chunks, keyed by index."""

    _parts: dict[int, dict[str, Any]] = field(default_factory=dict)

    def add(self, index: int, call_id: str | None, name: str | None, fragment: str) -> None:
        slot = self._parts.setdefault(index, {"id": "", "name": "", "args": ""})
        if call_id:
            slot["id"] = call_id
        if name and not slot["name"]:
            slot["name"] = name
        slot["args"] += fragment

    def finish(self) -> list[ToolCall]:
        calls = [_to_call(i, p) for i, p in sorted(self._parts.items())]
        self._parts.clear()
        return calls


def _to_call(index: int, part: dict[str, Any]) -> ToolCall:
    import json

    raw = part["args"].strip() or "{}"
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    call_id = part["id"] or f"call_{index}"
    if isinstance(parsed, dict):
        return ToolCall(id=call_id, name=part["name"], arguments=parsed)
    return ToolCall(id=call_id, name=part["name"], raw_arguments=raw)


CHARS_PER_TOKEN = 4


def estimate_tokens(request: ModelRequest, answer: str = "") -> int:
    """A rough count of the tokens a call used (4 characters a token), for servers that
    report none: the system prompt, the history, the tool specs and the answer."""
    chars = len(request.system) + len(answer)
    chars += sum(len(m.model_dump_json(exclude={"usage"})) for m in request.messages)
    return chars_tokens(chars + tools_chars(request.tools))


def tools_chars(tools: Sequence[ToolSpec]) -> int:
    """What the tool specs add to a request, in characters."""
    return sum(_spec_chars(t) for t in tools)


def estimate_text_tokens(text: str) -> int:
    """A rough count of the tokens in `text` (4 characters a token)."""
    return chars_tokens(len(text))


def chars_tokens(chars: int) -> int:
    """A rough count of the tokens `chars` characters make (4 characters a token)."""
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


_SPEC_CHARS: dict[tuple[str, str], int] = {}


def _spec_chars(tool: ToolSpec) -> int:
    """A tool spec's size, measured once per tool (its schema is the same every call)."""
    key = (tool.name, tool.description)
    size = _SPEC_CHARS.get(key)
    if size is None:
        if len(_SPEC_CHARS) >= 4096:  # many MCP servers come and go: start over
            _SPEC_CHARS.clear()
        size = _SPEC_CHARS[key] = len(tool.name) + len(tool.description) + len(str(tool.parameters))
    return size

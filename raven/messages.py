"""Provider-neutral conversation messages: what a session's transcript is made of.

Shared vocabulary of the engine, the providers and the session store. Knows no
vendor wire format and no protocol.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel


class _Model(BaseModel):
    # Stored snake_case; shown camelCase (dump with by_alias=True), as on every wire.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


class TextPart(_Model):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Model):
    type: Literal["image"] = "image"
    data: str
    """Base64-encoded bytes."""
    mime_type: str


Part = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ToolCall(_Model):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed arguments; `{}` when the model sent none."""
    raw_arguments: str | None = None
    """The model's argument text when it was not a JSON object."""
    title: str | None = None
    """How the call was shown to people, e.g. "Read notes.txt"; set when it is stored."""
    kind: str | None = None
    """The tool's kind (read, edit, execute, fetch, other); set when it is stored."""


class UserMessage(_Model):
    role: Literal["user"] = "user"
    parts: list[Part]

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


class TokenUsage(_Model):
    """The tokens one model call (or one sub-agent's task) used."""

    by: str
    """Who spent them: the model's id, or the sub-agent's name."""
    input_tokens: int = 0
    output_tokens: int = 0
    estimated: bool = False
    """The server reported none; counted from characters."""


class AssistantMessage(_Model):
    role: Literal["assistant"] = "assistant"
    text: str = ""
    thought: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: TokenUsage | None = None
    """What the model call that wrote it used."""


class ToolResultMessage(_Model):
    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: list[ImagePart] = Field(default_factory=list)
    usage: TokenUsage | None = None
    """What the call spent on a model of its own (a sub-agent's task, say)."""


class CompactionMessage(_Model):
    """What a compaction left: a summary standing for the transcript before `kept_from`.

    Stored at the end of the transcript when it was made; the model sees, from then on,
    the summary and the messages from `kept_from` on (`raven.engine.compaction`). The
    messages it stands for stay in the store for loading, exporting and searching."""

    role: Literal["compaction"] = "compaction"
    id: str
    summary: str
    kept_from: int
    """The index in the transcript of the oldest message still sent as it is."""
    usage: TokenUsage | None = None
    """What the model call that wrote the summary used."""


Message = Annotated[
    UserMessage | AssistantMessage | ToolResultMessage | CompactionMessage,
    Field(discriminator="role"),
]


MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def content_chars(message: Message) -> int:
    """How long a message's contents are, in characters (its text, thought, parts,
    results, calls, images or summary), counted without writing it out: a long answer is
    not copied to be measured."""
    if isinstance(message, CompactionMessage):
        return len(message.summary)
    if isinstance(message, UserMessage):
        return sum(len(p.text if isinstance(p, TextPart) else p.data) for p in message.parts)
    if isinstance(message, AssistantMessage):
        calls = sum(
            len(c.id) + len(c.name) + len(c.raw_arguments or json.dumps(c.arguments))
            for c in message.tool_calls
        )
        return len(message.text) + len(message.thought) + calls
    images = sum(len(i.data) for i in message.images)
    return len(message.call_id) + len(message.content) + images


INTERRUPTED_RESULT = "Interrupted: Raven stopped before this tool call finished."
REJECTED_RESULT = "The user rejected this tool call. Do not retry it; ask or explain instead."
NOT_RUN_RESULTS: dict[str, str] = {
    "refused": "Not run: refused by policy (the session's mode or the server's approval "
    "setting); no one was asked. Do not retry it; explain what you needed or do without it.",
    "unanswered": "Not run: no one answered the approval request in time, or no one could be "
    "asked. Do not retry it now; say what you wanted to do so the user can allow it.",
    "cancelled": "Not run: the approval request was cancelled before anyone answered.",
}
"""What the model is told when a call needing approval was not allowed, by why."""
_SHOWN = {
    REJECTED_RESULT: "Rejected: not run.",
    NOT_RUN_RESULTS["refused"]: "Not run: the session's mode or the server's approval "
    "setting refuses it; no one was asked.",
    NOT_RUN_RESULTS["unanswered"]: "Not run: no one answered the approval request in time, "
    "or no one could be asked.",
}


def shown(result: str) -> str:
    """A tool result as people see it: what tells the model how to go on ("do not retry
    it") reads, for people, as what happened."""
    return _SHOWN.get(result, result)


def user_text(text: str) -> UserMessage:
    """A user message holding one text part."""
    return UserMessage(parts=[TextPart(text=text)])

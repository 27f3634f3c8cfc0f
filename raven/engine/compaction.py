"""Compaction: a long session summarised near its model's context window, so that a turn
sends the summary and the newest messages instead of the whole transcript.

Decides when a request would pass the configured share of the window (`due`), where the
part kept as it is begins (`split`: always at a person's message, never after the running
turn's prompt), and asks the model for a summary of the rest and of the previous
summary. `compact` commits the result, a `CompactionMessage`, through the session; one
that fails or is cancelled commits nothing, so the session is left as it was. The whole
transcript stays in the store. Knows no protocol.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raven.config import CompactionConfig
from raven.engine.events import CompactionText, CompactionUpdated, Emit
from raven.errors import RavenError
from raven.messages import (
    AssistantMessage,
    CompactionMessage,
    Message,
    TextPart,
    TokenUsage,
    ToolResultMessage,
    UserMessage,
    content_chars,
    user_text,
)
from raven.providers import (
    CHARS_PER_TOKEN,
    ModelRequest,
    Provider,
    ProviderError,
    TextDelta,
    Usage,
    chars_tokens,
)
from raven.safe_chunks import SafeChunks

if TYPE_CHECKING:
    from raven.engine.session import LiveSession

log = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "You summarise a conversation between a user and a software agent, so that the agent "
    "can carry on the work from your summary alone. Keep the user's goals and requests, "
    "what was decided, the files, commands and facts the work depends on (names and paths "
    "exactly), what is done and what remains. Write it concisely, in plain prose or short "
    "lists, in the conversation's language. Add nothing that is not in it.\n\n"
    "<conversation>\n{conversation}\n</conversation>"
)
SUMMARY_REQUEST = "Write the summary now."
SUMMARY_HEADING = (
    "Summary of the earlier part of this conversation (the messages after it follow as "
    "they were):\n"
)
RESULT_CHARS = 2_000
"""How much of a tool's result the summariser reads."""
ARGUMENT_CHARS = 500
"""How much of a tool call's arguments the summariser reads."""
READ_SHARE = 0.5
"""The share of the summarising model's window the conversation it reads may fill."""
SUMMARY_SHARE = 0.15
"""The share of the session model's window a summary may fill (its `max_tokens`): with
the newest messages kept (`keep`), what the model is sent next stays well inside it."""
SUMMARY_MIN_TOKENS = 256
OMITTED = "[… the earliest messages are left out here]"


class NothingToCompact(RavenError):
    """Every message the model sees is part of what must be kept (the running turn)."""


@dataclass(frozen=True)
class Compactor:
    """How a session compacts: the settings, and the model that writes the summary."""

    settings: CompactionConfig
    summariser: Callable[[], Provider] | None = None
    """The summarising model's provider, made when first needed; None: the session's own
    model."""


MESSAGE_CHARS = 48
"""What a message adds to a request beside its contents (its role, the wire's keys)."""


def message_chars(message: Message) -> int:
    """What a message adds to a request, in characters (`content_chars` and the wire's
    keys)."""
    if isinstance(message, CompactionMessage):
        return 0  # its summary goes in the system prompt, counted there
    return MESSAGE_CHARS + content_chars(message)


def with_summary(system: str, summary: str | None) -> str:
    """The system prompt with the newest compaction's summary after it."""
    return f"{system}\n\n{SUMMARY_HEADING}{summary}" if summary else system


def due(settings: CompactionConfig, window: int | None, request_chars: int) -> bool:
    """Whether a request of `request_chars` would pass the share of the window the
    settings allow (never when the window is unknown or compaction is off)."""
    return bool(
        settings.auto and window and chars_tokens(request_chars) > settings.threshold * window
    )


def split(
    messages: Sequence[Message], start: int, sizes: Sequence[int], keep_chars: int, latest: int
) -> int:
    """The transcript index where the part kept as it is begins: the oldest person's
    message after which at most `keep_chars` follow, else the newest one; never after
    `latest` (the running turn's prompt). Raises `NothingToCompact` when no message
    before such a point is left to summarise."""
    after = sum(sizes)
    best: int | None = None
    for offset, (message, size) in enumerate(zip(messages, sizes, strict=True)):
        index = start + offset
        if index > latest:
            break
        if isinstance(message, UserMessage) and index > start:
            best = index
            if after <= keep_chars:
                return index
        after -= size
    if best is None:
        raise NothingToCompact("nothing older than the running turn is left to summarise")
    return best


def conversation(summary: str | None, messages: Sequence[Message], limit_chars: int) -> str:
    """The messages as the summariser reads them, the previous summary first; the oldest
    left out when the whole would pass `limit_chars`."""
    lines = [_line(m) for m in messages if not isinstance(m, CompactionMessage)]
    head = [f"[Summary of what came before]\n{summary}"] if summary else []
    room = limit_chars - sum(len(h) + 2 for h in head)
    kept: list[str] = []
    for line in reversed(lines):
        room -= len(line) + 2
        if room < 0:
            kept.append(OMITTED)
            break
        kept.append(line)
    return "\n\n".join([*head, *reversed(kept)])


def _line(message: Message) -> str:
    if isinstance(message, UserMessage):
        images = sum(1 for p in message.parts if not isinstance(p, TextPart))
        return "User: " + message.text + (f" [{images} image(s)]" if images else "")
    if isinstance(message, AssistantMessage):
        said = [f"Agent: {message.text}"] if message.text else []
        for call in message.tool_calls:
            arguments = call.raw_arguments or json.dumps(call.arguments, ensure_ascii=False)
            said.append(f"Agent called {call.name}: {_clip(arguments, ARGUMENT_CHARS)}")
        return "\n".join(said) or "Agent: (nothing)"
    if isinstance(message, ToolResultMessage):
        failed = " (failed)" if message.is_error else ""
        return f"Result of {message.name}{failed}: {_clip(message.content, RESULT_CHARS)}"
    return ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" […{len(text) - limit} more]"


async def summarise(
    provider: Provider,
    previous: str | None,
    messages: Sequence[Message],
    emit: Emit,
    compaction_id: str,
    max_tokens: int | None = None,
) -> tuple[str, TokenUsage | None]:
    """The summary of `previous` and `messages` in at most `max_tokens`, streamed as
    `CompactionText` while the model writes it, with what the call used; raises
    `ProviderError` (an empty answer is one too)."""
    window = provider.context_window or 0
    limit = int(window * READ_SHARE * CHARS_PER_TOKEN) if window else 200_000
    request = ModelRequest(
        system=SUMMARY_PROMPT.format(conversation=conversation(previous, messages, limit)),
        messages=[user_text(SUMMARY_REQUEST)],
        max_tokens=max_tokens,
    )
    text = io.StringIO()
    shown = SafeChunks()
    usage: TokenUsage | None = None
    stream = provider.stream(request)
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                text.write(event.text)
                if piece := shown.feed(event.text):
                    emit(CompactionText(compaction_id, piece))
            elif isinstance(event, Usage):
                usage = TokenUsage(
                    by=provider.model_id,
                    input_tokens=event.input_tokens,
                    output_tokens=event.output_tokens,
                    estimated=event.estimated,
                )
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    if piece := shown.flush():
        emit(CompactionText(compaction_id, piece))
    summary = text.getvalue().strip()
    if not summary:
        raise ProviderError(f"{provider.model_id} wrote no summary")
    return summary, usage


async def compact(
    session: LiveSession, emit: Emit, fixed_chars: int, latest: int, keep: bool = True
) -> bool:
    """Summarise the session's older messages and commit the compaction, told as
    `CompactionUpdated` (in progress, then completed or failed) with the summary's text
    between; `fixed_chars` is what a request carries beside its messages (the system
    prompt, the tools). `keep`: the newest messages the settings' share of the window
    holds stay as they are, else only the newest turn does (a compaction asked for).
    A model that fails leaves the session as it was (False: it did not compact). Raises
    `NothingToCompact` (before anything is told) when everything must be kept, and
    `CancelledError` when cancelled (told as cancelled first)."""
    window = session.context_window or 0
    share = session.compactor.settings.keep if keep else 0
    keep_chars = int(share * window * CHARS_PER_TOKEN)
    at = split(session.window, session.window_start, session.sizes, keep_chars, latest)
    cut = at - session.window_start
    before = chars_tokens(fixed_chars + session.window_chars)
    compaction_id = f"cmp_{uuid.uuid4().hex[:12]}"
    emit(CompactionUpdated(compaction_id, "in_progress", tokens_before=before))
    summariser = session.compactor.summariser
    provider = summariser() if summariser is not None else session.provider
    older = session.window[:cut]
    try:
        most = max(SUMMARY_MIN_TOKENS, int(window * SUMMARY_SHARE)) if window else None
        summary, usage = await summarise(
            provider, session.summary, older, emit, compaction_id, most
        )
    except ProviderError as exc:
        log.info("compaction of session %s failed: %s", session.id, exc)
        emit(CompactionUpdated(compaction_id, "failed", error=str(exc), tokens_before=before))
        return False
    except BaseException:
        emit(CompactionUpdated(compaction_id, "cancelled", tokens_before=before))
        raise
    await session.commit(
        CompactionMessage(id=compaction_id, summary=summary, kept_from=at, usage=usage)
    )
    after = chars_tokens(fixed_chars + session.window_chars)
    emit(CompactionUpdated(compaction_id, "completed", summary, None, before, after))
    return True

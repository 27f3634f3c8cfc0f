"""A deterministic offline model for tests, demos and users' own CI.

Without a script it echoes the last user text word by word. With a script it
plays one step per model call, shared by every session of the process, then
echoes. Never touches the network.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from raven.config import ConfigError, ModelSpec
from raven.messages import ToolCall, UserMessage
from raven.providers.base import (
    Finish,
    ModelEvent,
    ModelRequest,
    ProviderError,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    Usage,
    estimate_tokens,
)


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ScriptCall(_Wire):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptStep(_Wire):
    text: str | None = None
    thought: str | None = None
    tool_calls: list[ScriptCall] = Field(default_factory=list)
    delay_ms: int = Field(default=0, ge=0)
    wait_for: str | None = None
    """A file the step waits to exist before it answers (relative to the script's folder):
    a test or a CI job opens the gate when it is ready, however slow the machine is."""
    word_delay_ms: int = Field(default=0, ge=0)
    """A pause before each word after the first, to stream like a slow model."""
    pause_for: str | None = None
    """A file the step waits to exist after its first word, as `waitFor` does: a test sees
    the turn mid-stream, however slow the machine is."""
    stop: Literal["end_turn", "max_tokens", "refusal"] | None = None


_YIELD_EVERY_WORDS = 64
GATE_DEADLINE_S = 120.0
"""How long a step waits for its `waitFor` file before the model call fails."""
_GATE_POLL_S = 0.01
_WORDS = re.compile(r"\S+\s*|\s+")
_call_ids = itertools.count(1)


class _Script:
    """Steps of one script file and the process-wide position in them."""

    def __init__(self, steps: list[ScriptStep], folder: Path) -> None:
        self._steps = steps
        self.folder = folder
        self._next = 0

    def take(self) -> ScriptStep | None:
        if self._next >= len(self._steps):
            return None
        step = self._steps[self._next]
        self._next += 1
        return step


_scripts: dict[Path, _Script] = {}


def load_script(path: Path) -> _Script:
    """The shared script for `path`, read once per process."""
    path = path.resolve()
    if path not in _scripts:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"script {path}: cannot read: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"script {path}: invalid JSON at line {exc.lineno}, column {exc.colno}"
            ) from exc
        if not isinstance(raw, list):
            raise ConfigError(f"script {path}: the top level must be a list of steps")
        try:
            steps = [ScriptStep.model_validate(item) for item in raw]
        except ValidationError as exc:
            raise ConfigError(f"script {path}: {exc.errors()[0]['msg']}") from exc
        _scripts[path] = _Script(steps, path.parent)
    return _scripts[path]


class ScriptedProvider:
    def __init__(self, spec: ModelSpec, script: _Script | None) -> None:
        self.model_id = spec.id
        self.context_window = spec.context_window or 128_000
        self._script = script

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        step = self._script.take() if self._script else None
        if step is None:
            step = ScriptStep(text=_last_user_text(request))
        if step.wait_for and self._script:
            await _gate(self._script.folder / step.wait_for)
        if step.delay_ms:
            await asyncio.sleep(step.delay_ms / 1000)
        if step.thought:
            yield ThoughtDelta(step.thought)
        words = 0  # read one at a time: a long answer is never held twice
        for words, word in enumerate(_WORDS.finditer(step.text or ""), start=1):
            if step.word_delay_ms and words > 1:
                await asyncio.sleep(step.word_delay_ms / 1000)
            if step.pause_for and self._script and words == 2:
                await _gate(self._script.folder / step.pause_for)
            yield TextDelta(word.group())
            if words % _YIELD_EVERY_WORDS == 0:
                await asyncio.sleep(0)  # let the loop breathe on very long answers
        yield Usage(estimate_tokens(request), words, estimated=True)
        for call in step.tool_calls:
            yield ToolCallReady(
                ToolCall(id=f"call_{next(_call_ids)}", name=call.name, arguments=call.arguments)
            )
        yield Finish(step.stop or ("tool_use" if step.tool_calls else "end_turn"))


async def _gate(path: Path) -> None:
    try:
        async with asyncio.timeout(GATE_DEADLINE_S):
            # Another process makes the file, so there is no event to await; a stat is cheap.
            while not path.exists():  # noqa: ASYNC110, ASYNC240
                await asyncio.sleep(_GATE_POLL_S)
    except TimeoutError:
        raise ProviderError(
            f"scripted step waited {GATE_DEADLINE_S:.0f} s for {path}, which never appeared"
        ) from None


def _last_user_text(request: ModelRequest) -> str:
    for msg in reversed(request.messages):
        if isinstance(msg, UserMessage) and msg.text:
            return msg.text
    return ""

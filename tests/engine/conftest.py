from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from raven.config import Paths, RavenConfig
from raven.engine import ApprovalRequest, Decision, Question, Runtime, TurnEvent

MakeRuntime = Callable[..., Runtime]


class RecordingAsker:
    """An asker for tests: answers from queues and records what it was asked."""

    def __init__(self, decisions: list[Decision] = (), answers: list[str | None] = ()) -> None:  # type: ignore[assignment]
        self.decisions = list(decisions)
        self.answers = list(answers)
        self.approvals: list[ApprovalRequest] = []
        self.questions: list[Question] = []

    async def approve(self, request: ApprovalRequest) -> Decision:
        self.approvals.append(request)
        return self.decisions.pop(0)

    async def ask(self, question: Question) -> str | None:
        self.questions.append(question)
        return self.answers.pop(0)


class Events(list[TurnEvent]):
    def of(self, kind: type) -> list[Any]:
        return [e for e in self if isinstance(e, kind)]


@pytest.fixture
async def make_runtime(tmp_path: Path) -> AsyncIterator[MakeRuntime]:
    made: list[Runtime] = []
    counter = iter(range(1000))

    def make(steps: list[dict[str, Any]] | None = None, **config: Any) -> Runtime:
        n = next(counter)
        models = [{"id": "test", "provider": "scripted"}]
        if steps is not None:
            script = tmp_path / f"script{n}.json"
            script.write_text(json.dumps(steps))
            models = [{"id": "test", "provider": "scripted", "script": str(script)}]
        cfg = RavenConfig.model_validate({"models": models, "defaultModel": "test", **config})
        paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / f"data{n}")
        runtime = Runtime(cfg, paths, face="test")
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.aclose()

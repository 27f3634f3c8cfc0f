from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from raven.engine import (
    AgentText,
    AgentThought,
    Answered,
    ApprovalRequest,
    Asking,
    CompactionText,
    CompactionUpdated,
    ModeChanged,
    ModelChanged,
    Notice,
    PlanUpdated,
    Question,
    SessionEnded,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnStarted,
    UsageUpdated,
)
from raven.engine.codec import LOGGED, event_from_json, event_json, events_schema
from raven.messages import ImagePart, TextPart
from raven.tools import (
    ChildPlan,
    ChildPlanStep,
    ChildSubagent,
    ChildText,
    ChildToolCall,
    FileDiff,
    PlanStep,
)

COMMITTED = Path(__file__).parents[2] / "docs" / "events.schema.json"
REGENERATE = "generated from the engine's events: run `uv run python -m raven.compose.generated`"

DIFF = FileDiff(Path("/w/a.txt"), "old", "new")
SAMPLES: list[Any] = [
    AgentText("hello"),
    AgentThought("hmm"),
    ToolCallStarted("c1", "write_file", "Write a.txt", "edit", {"path": "a.txt"}, [Path("/w")]),
    ToolCallUpdated("c1", "completed", "done", DIFF, None, "Wrote a.txt"),
    ToolCallUpdated("d", "in_progress", "helper: hi", detail=ChildText("helper", "hi", "hi")),
    ToolCallUpdated(
        "d",
        "in_progress",
        "helper: → Read",
        detail=ChildToolCall("helper", "t", "Read", None, "read"),
    ),
    ToolCallUpdated(
        "d",
        "in_progress",
        "helper: ✓ Read",
        detail=ChildToolCall("helper", "t", "Read", "completed"),
    ),
    ToolCallUpdated(
        "d", "in_progress", "plans", detail=ChildPlan("helper", (ChildPlanStep("a", "pending"),))
    ),
    ToolCallUpdated(
        "d", "in_progress", "w", detail=ChildText("helper › w", "hi", "hi", subagent="s1/w")
    ),
    ToolCallUpdated(
        "d",
        "in_progress",
        "helper › w: started",
        detail=ChildSubagent("helper › w", "s1/w", "running", description="go", cancellable=True),
    ),
    ToolCallUpdated("d", "in_progress", "", detail=ChildSubagent("helper › w", "s1/w", None)),
    PlanUpdated((PlanStep(content="look", status="in_progress", priority="high"),)),
    UsageUpdated(120, 8192, False, 100, 20),
    TitleChanged("A title"),
    Notice("the model is out of reach"),
    CompactionUpdated("cmp_1", "in_progress", tokens_before=7000),
    CompactionText("cmp_1", "The user asked for "),
    CompactionUpdated("cmp_1", "completed", "The user asked for a fix.", None, 7000, 900),
    CompactionUpdated("cmp_2", "failed", error="the model is out of reach"),
    TurnEnded("end_turn", "it failed"),
    TurnStarted((TextPart(text="hi"), ImagePart(data="aGk=", mime_type="image/png"))),
    ModeChanged("plan"),
    ModelChanged("big"),
    SessionEnded(),
    Asking(
        "r1",
        approval=ApprovalRequest(
            "c1",
            "write_file",
            "Write a.txt",
            "edit",
            {"path": "a.txt"},
            [Path("/w/a.txt")],
            ("allow_once", "reject_once"),
            DIFF,
            True,
            "r1",
        ),
    ),
    Asking("r2", question=Question("Which colour?", ("red", "blue"), "c2", "r2")),
    Answered("r1"),
]


def test_the_committed_schema_is_the_one_the_events_make() -> None:
    assert json.loads(COMMITTED.read_text()) == events_schema(), REGENERATE


def test_every_event_a_log_holds_has_a_sample() -> None:
    assert {type(e) for e in SAMPLES} == set(LOGGED)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__.lower())
def test_each_event_goes_to_json_that_the_schema_takes_and_comes_back(event: Any) -> None:
    written = event_json(event)
    jsonschema.validate(written, events_schema())
    assert event_from_json(json.loads(json.dumps(written))) == event


def test_the_schema_refuses_what_no_event_is() -> None:
    schema = events_schema()
    wrong = [
        {"schema": "raven.events/1", "type": "TurnEnded", "stopReason": "tired", "error": None},
        {"schema": "raven.events/1", "type": "AgentText"},  # its text is missing
        {"schema": "raven.events/1", "type": "Unheard", "text": "x"},
        {"schema": "raven.events/0", "type": "AgentText", "text": "x"},
    ]
    for body in wrong:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(body, schema)
    assert event_from_json({"schema": "raven.events/1", "type": "Unheard"}) is None

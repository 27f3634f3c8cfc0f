"""The ACP shapes declared once: what Raven sends fits the SDK's schema, what it reads is parsed."""

from __future__ import annotations

from pathlib import Path

from acp import schema

from raven.acp import protocol as p


def test_a_tool_call_fits_both_frames_that_carry_it() -> None:
    fields = p.tool_call("c1", "Write a.txt", "edit", {"path": "a.txt"}, [Path("/w/a.txt")])
    schema.ToolCallStart.model_validate({"sessionUpdate": "tool_call", **fields})
    request = {
        "sessionId": "s",
        "toolCall": fields,
        "options": [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}],
    }
    schema.RequestPermissionRequest.model_validate(request)
    assert p.tool_call("q", "Which?") == {"toolCallId": "q", "title": "Which?"}


def test_permission_and_elicitation_results_are_parsed_not_walked() -> None:
    selected = p.read(
        p.RequestPermissionResult, {"outcome": {"outcome": "selected", "optionId": "x"}}
    )
    assert selected is not None and isinstance(selected.outcome, p.SelectedOutcome)
    assert selected.outcome.option_id == "x"
    cancelled = p.read(p.RequestPermissionResult, {"outcome": {"outcome": "cancelled"}})
    assert cancelled is not None and isinstance(cancelled.outcome, p.CancelledOutcome)
    for garbage in (None, [], {"outcome": "selected"}, {"outcome": {"outcome": "maybe"}}):
        assert p.read(p.RequestPermissionResult, garbage) is None
    accepted = p.read(p.ElicitationResult, {"action": "accept", "content": {"answer": "dev"}})
    assert accepted is not None and accepted.content == {"answer": "dev"}
    assert p.read(p.ElicitationResult, {"action": "shrug"}) is None

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


def wire(model: object) -> object:
    """An SDK schema object as the frame an agent on the SDK sends."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[attr-defined]


def test_what_the_client_reads_is_parsed_from_the_sdks_own_frames() -> None:
    text = schema.AgentMessageChunk(
        session_update="agent_message_chunk",
        content=schema.TextContentBlock(type="text", text="hi"),
    )
    chunk = p.read_update(wire(text))
    assert isinstance(chunk, p.TextChunk) and chunk.text == "hi"

    started = schema.ToolCallStart(
        session_update="tool_call",
        tool_call_id="c1",
        title="Run ls",
        kind="execute",
        status="pending",
    )
    call = p.read_update(wire(started))
    assert isinstance(call, p.ToolCallStart)
    assert (call.tool_call_id, call.title, call.kind, call.status) == (
        "c1",
        "Run ls",
        "execute",
        "pending",
    )

    done = schema.ToolCallProgress(
        session_update="tool_call_update", tool_call_id="c1", status="completed"
    )
    change = p.read_update(wire(done))
    assert (
        isinstance(change, p.ToolCallChange)
        and change.status == "completed"
        and change.title is None
    )

    planned = schema.AgentPlanUpdate(
        session_update="plan",
        entries=[schema.PlanEntry(content="Read", priority="high", status="in_progress")],
    )
    plan = p.read_update(wire(planned))
    assert isinstance(plan, p.Plan) and [(e.content, e.status) for e in plan.entries] == [
        ("Read", "in_progress")
    ]
    thought = schema.AgentThoughtChunk(
        session_update="agent_thought_chunk",
        content=schema.TextContentBlock(type="text", text="hm"),
    )
    assert p.read_update(wire(thought)) is None  # not shown: Raven shows the child's answer
    for garbage in (None, "text", {"sessionUpdate": "tool_call", "title": 3}):
        assert p.read_update(garbage) is None

    asked = schema.RequestPermissionRequest(
        session_id="s",
        tool_call=schema.ToolCallUpdate(
            tool_call_id="c1", title="Run ls", kind="execute", raw_input={"cmd": "ls"}
        ),
        options=[schema.PermissionOption(option_id="ok", name="Allow once", kind="allow_once")],
    )
    request = p.read(p.PermissionRequest, wire(asked))
    assert request is not None and request.tool_call.raw_input == {"cmd": "ls"}
    assert [(o.option_id, o.kind) for o in request.options] == [("ok", "allow_once")]

    init = schema.InitializeResponse(
        protocol_version=1,
        agent_info=schema.Implementation(name="codex-acp", version="0.16.0"),
        agent_capabilities=schema.AgentCapabilities(load_session=True),
    )
    answered = p.read(p.InitializeResult, wire(init))
    assert answered is not None and answered.protocol_version == 1
    assert answered.agent_info is not None and answered.agent_info.name == "codex-acp"
    assert answered.agent_capabilities["loadSession"] is True
    created = p.read(p.NewSessionResult, wire(schema.NewSessionResponse(session_id="s1")))
    assert created is not None and created.session_id == "s1"
    ended = p.read(p.PromptResult, wire(schema.PromptResponse(stop_reason="cancelled")))
    assert ended is not None and ended.stop_reason == "cancelled"
    assert p.read(p.NewSessionResult, {"id": "s1"}) is None  # no session id: not ACP

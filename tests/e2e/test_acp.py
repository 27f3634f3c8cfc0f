"""`raven acp` end to end: the official ACP SDK client launches it and drives every method."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from raven.messages import AssistantMessage, ToolResultMessage, user_text
from raven.sandbox import kernel_version
from raven.sessions import SqliteStore
from tests.acp_schema import AcpSchema
from tests.children import scripted_child
from tests.conftest import RAVEN, write_config
from tests.e2e.acp_harness import Editor, RavenAcp
from tests.e2e.test_acp_listen import TS_SDK
from tests.fakes.compacting import WINDOW, compacting_model, summarising
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream, request_tokens
from tests.npm import npm_install
from tests.processes import ended, pid_from

MODES = [
    {"id": "ask", "name": "Ask", "description": "Ask before edits", "approvals": "ask"},
    {"id": "auto", "name": "Auto", "approvals": "auto"},
]

Start = Callable[..., "asyncio.Future[RavenAcp]"]


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture
async def start(env: dict[str, str], home: Path, acp_schema: AcpSchema) -> AsyncIterator[Any]:
    agents: list[RavenAcp] = []

    async def launch(
        steps: list[dict[str, Any]] | None = None,
        modes: bool = True,
        elicitation: bool = False,
        editor: Editor | None = None,
        initialize: bool = True,
        **extra: Any,
    ) -> RavenAcp:
        (home / "script.json").write_text(json.dumps(steps or []))
        write_config(
            home,
            {
                "models": [
                    {
                        "id": "scripted",
                        "name": "Scripted",
                        "provider": "scripted",
                        "script": "script.json",
                        "contextWindow": 8000,
                    }
                ],
                "defaultModel": "scripted",
                **({"modes": MODES, "defaultMode": "ask"} if modes else {}),
                **extra,
            },
        )
        agent = await RavenAcp.start(env, editor)
        agents.append(agent)
        if initialize:
            await agent.initialize(elicitation=elicitation)
        return agent

    yield launch
    for agent in agents:
        try:
            if agent.proc.returncode is None:
                assert await agent.close() == 0
            agent.check_frames(acp_schema)
        finally:
            agent.kill()


def text(value: str) -> list[schema.TextContentBlock]:
    return [acp.text_block(value)]


async def test_initialize_advertises_what_raven_serves(start: Any) -> None:
    agent = await start(initialize=False)
    result = await agent.initialize()
    assert result.protocol_version == 1
    caps = result.agent_capabilities
    assert caps.load_session is True
    assert caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
    assert not caps.prompt_capabilities.audio
    assert not caps.mcp_capabilities.http and not caps.mcp_capabilities.sse
    sc = caps.session_capabilities
    assert sc.list is not None and sc.resume is not None and sc.close is not None
    assert sc.delete is not None and sc.fork is not None
    assert caps.field_meta == {"raven": {"steer": True}}
    assert result.field_meta == {"steering": {"supported": True}}  # as the adapters say it
    assert result.agent_info.name == "raven"
    (setup,) = result.auth_methods  # what the ACP registry's auth check looks for
    assert setup.id == "setup" and "raven setup" in (setup.description or "")


async def test_new_session_offers_model_and_mode_pickers(start: Any, tmp_path: Path) -> None:
    agent = await start()
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    # The editor learns which project instructions the session follows, and its sandbox.
    meta = new.field_meta or {}
    assert meta["raven"] == {"projectInstructions": [str(tmp_path / "AGENTS.md")]}
    assert meta["sandbox"]["policy"] == {"level": "off", "required": False, "enforced": True}
    assert set(meta["sandbox"]["capability"]["guarantees"]) == {
        "fsIsolation",
        "netIsolation",
        "processCaps",
    }
    assert new.modes is not None and new.modes.current_mode_id == "ask"
    options = {o.id: o for o in new.config_options}
    assert options["model"].category == "model" and options["model"].current_value == "scripted"
    assert {o.value for o in options["model"].options} == {"scripted", "echo"}
    assert options["mode"].category == "mode" and options["mode"].current_value == "ask"
    await agent.editor.wait_for("available_commands_update")


@pytest.mark.skipif(kernel_version() < 1, reason="this kernel has no Landlock")
async def test_a_client_requires_a_sandbox_of_the_session_or_is_told_it_cannot_be_held(
    start: Any, tmp_path: Path, env: dict[str, str]
) -> None:
    agent = await start()
    new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    sid = new.session_id
    options = {o.id: o for o in new.config_options}
    assert options["acp.sandbox"].current_value == "off"
    answer = await agent.conn.set_config_option(
        config_id="acp.sandbox", session_id=sid, value="workspace"
    )
    assert {o.id: o.current_value for o in answer.config_options}["acp.sandbox"] == "workspace"
    env["RAVEN_SANDBOX_ABI"] = "0"  # a kernel without Landlock
    old = await start()
    sid = (await old.conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
    with pytest.raises(acp.RequestError) as refused:
        await old.conn.set_config_option(config_id="acp.sandbox", session_id=sid, value="strict")
    assert refused.value.data["error"] == "sandbox_policy_unsatisfiable"
    assert refused.value.data["capability"]["guarantees"]["fsIsolation"] == "none"


async def test_no_modes_declared_means_no_modes_and_set_mode_fails(
    start: Any, tmp_path: Path
) -> None:
    agent = await start(modes=False)
    new = await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert new.modes is None
    assert [o.id for o in new.config_options] == ["model", "acp.sandbox"]
    with pytest.raises(acp.RequestError, match="none are declared"):
        await agent.conn.set_session_mode(session_id=new.session_id, mode_id="ask")


async def test_relative_cwd_is_invalid_params(start: Any) -> None:
    agent = await start()
    with pytest.raises(acp.RequestError) as info:
        await agent.conn.new_session(cwd="relative/dir", mcp_servers=[])
    assert info.value.code == -32602 and "absolute" in str(info.value)


async def test_prompt_streams_the_answer_and_ends_end_turn(start: Any, tmp_path: Path) -> None:
    agent = await start([{"thought": "thinking", "text": "Hello from Raven."}])
    sid = await agent.new_session(tmp_path)
    result = await agent.conn.prompt(session_id=sid, prompt=text("greet me"))
    assert result.stop_reason == "end_turn"
    assert agent.editor.text(sid) == "Hello from Raven."
    assert agent.editor.text(sid, "agent_thought_chunk") == "thinking"
    assert agent.editor.of("session_info_update")[0].title == "greet me"
    usage = agent.editor.of("usage_update")[0]
    assert usage.size == 8000 and usage.used > 0


async def test_prompt_accepts_images_links_and_embedded_resources(
    start: Any, tmp_path: Path
) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    blocks = [
        acp.text_block("look at"),
        acp.image_block("aGVsbG8=", "image/png"),
        acp.resource_link_block(name="spec", uri="file:///spec.md"),
        acp.resource_block(acp.embedded_text_resource("file:///a.txt", "embedded words")),
    ]
    assert (await agent.conn.prompt(session_id=sid, prompt=blocks)).stop_reason == "end_turn"
    # the echo answers the last text part: the embedded resource, wrapped
    assert "embedded words" in agent.editor.text(sid)


async def test_permission_allow_and_reject(start: Any, tmp_path: Path) -> None:
    agent = await start(
        [
            {"toolCalls": [call("write_file", path="yes.txt", content="Y")]},
            {"toolCalls": [call("write_file", path="no.txt", content="N")]},
            {"text": "done"},
        ]
    )
    agent.editor.permission_answers = ["allow_once", "reject_once"]
    sid = await agent.new_session(tmp_path)
    assert (await agent.conn.prompt(session_id=sid, prompt=text("write"))).stop_reason == "end_turn"
    assert (tmp_path / "yes.txt").read_text() == "Y"
    assert not (tmp_path / "no.txt").exists()
    first = agent.editor.permissions[0]
    assert [o.kind for o in first.options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    assert first.tool_call.title == "Write yes.txt" and first.tool_call.kind == "edit"
    (asked_diff,) = first.tool_call.content or []  # the change, for the editor to show
    assert asked_diff.type == "diff" and asked_diff.new_text == "Y" and asked_diff.old_text is None
    calls = agent.editor.of("tool_call")
    assert first.tool_call.tool_call_id == calls[0].tool_call_id
    updates = agent.editor.of("tool_call_update")
    diffs = [c for u in updates for c in (u.content or []) if c.type == "diff"]
    assert diffs and diffs[0].new_text == "Y" and diffs[0].old_text is None
    assert [u.status for u in updates if u.status in ("completed", "failed")] == [
        "completed",
        "failed",
    ]


async def test_the_model_hears_whether_a_person_rejected_or_the_editor_cancelled(
    start: Any, tmp_path: Path, home: Path
) -> None:
    agent = await start(
        [
            {"toolCalls": [call("write_file", path="a.txt", content="A")]},
            {"toolCalls": [call("write_file", path="b.txt", content="B")]},
            {"text": "done"},
        ]
    )
    agent.editor.permission_answers = ["reject_once", "cancelled"]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("write"))
    failed = [u for u in agent.editor.of("tool_call_update") if u.status == "failed"]
    said = [c.content.text for u in failed for c in (u.content or []) if c.type == "content"]
    assert said == [  # the person reads what happened; the model is told how to go on
        "Rejected: not run.",
        "Not run: the approval request was cancelled before anyone answered.",
    ]
    store = SqliteStore(home / "data" / "raven.db")
    try:
        told = [m.content for m in store.messages(sid) if isinstance(m, ToolResultMessage)]
    finally:
        store.close()
    assert told[0].startswith("The user rejected this tool call. Do not retry it")


async def test_allow_always_is_remembered_for_the_session(start: Any, tmp_path: Path) -> None:
    agent = await start(
        [
            {"toolCalls": [call("run_command", command="echo one")]},
            {"toolCalls": [call("run_command", command="echo two")]},
            {"text": "ok"},
        ]
    )
    agent.editor.permission_answers = ["allow_always"]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("run"))
    assert len(agent.editor.permissions) == 1
    outputs = [
        c.content.text
        for u in agent.editor.of("tool_call_update")
        for c in (u.content or [])
        if c.type == "content"
    ]
    assert any("two" in o for o in outputs)


async def test_cancelled_permission_outcome_means_rejected(start: Any, tmp_path: Path) -> None:
    agent = await start(
        [{"toolCalls": [call("write_file", path="x.txt", content="x")]}, {"text": "ok"}]
    )
    agent.editor.permission_answers = ["cancelled"]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("go"))
    assert not (tmp_path / "x.txt").exists()


async def test_elicitation_form_answers_ask_user(start: Any, tmp_path: Path) -> None:
    agent = await start(
        [
            {"toolCalls": [call("ask_user", question="Which branch?", choices=["main", "dev"])]},
            {"text": "ok"},
        ],
        elicitation=True,
    )
    agent.editor.elicitation_answers = [
        schema.AcceptElicitationResponse(action="accept", content={"answer": "dev"})
    ]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("ask me"))
    asked = agent.editor.elicitations[0]
    assert asked["message"] == "Which branch?"
    results = [
        c.content.text
        for u in agent.editor.of("tool_call_update")
        for c in (u.content or [])
        if c.type == "content"
    ]
    assert "dev" in results


async def test_without_elicitation_choices_fall_back_to_a_permission_request(
    start: Any, tmp_path: Path
) -> None:
    agent = await start(
        [
            {"toolCalls": [call("ask_user", question="Deploy now?", choices=["yes", "later"])]},
            {"toolCalls": [call("ask_user", question="What name?")]},
            {"text": "ok"},
        ]
    )
    agent.editor.permission_answers = ["choice_1"]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("ask"))
    (asked,) = agent.editor.permissions
    assert asked.tool_call.title == "Deploy now?"
    assert [o.name for o in asked.options] == ["Skip", "yes", "later"]
    results = [
        c.content.text
        for u in agent.editor.of("tool_call_update")
        for c in (u.content or [])
        if c.type == "content"
    ]
    assert results == ["later", "no answer available"]


@pytest.mark.parametrize("approver", ["first allow", "first"])
async def test_an_editor_that_approves_on_its_own_never_answers_a_question(
    start: Any, tmp_path: Path, approver: str
) -> None:
    """acpx --approve-all answered "red" for a person who was never asked: a question's
    choices are never allow options, and the first option is Skip."""
    ask = call("ask_user", question="Which colour?", choices=["red", "blue"])
    agent = await start([{"toolCalls": [ask]}, {"text": "ok"}])
    agent.editor.permission_answers = [approver]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("ask"))
    assert [o.kind for o in agent.editor.permissions[0].options] == ["reject_once"] * 3
    results = [
        c.content.text
        for u in agent.editor.of("tool_call_update")
        for c in (u.content or [])
        if c.type == "content"
    ]
    assert results == ["no answer available"]


async def test_cancel_kills_a_running_command(start: Any, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    agent = await start(
        [
            {"toolCalls": [call("run_command", command=f"sleep 60 & echo $! > {pidfile}; wait")]},
        ],
        defaultMode="auto",
    )
    sid = await agent.new_session(tmp_path)
    prompt = asyncio.create_task(agent.conn.prompt(session_id=sid, prompt=text("sleep")))
    pid = await pid_from(pidfile)
    started = time.monotonic()
    await agent.conn.cancel(session_id=sid)
    assert (await asyncio.wait_for(prompt, 5)).stop_reason == "cancelled"
    assert time.monotonic() - started < 2.5
    assert await ended([pid], 5)  # killed with its group: gone a moment after
    statuses = [u.status for u in agent.editor.of("tool_call_update")]
    assert statuses[-1] == "failed"


async def test_cancel_withdraws_a_pending_permission_request(start: Any, tmp_path: Path) -> None:
    agent = await start([{"toolCalls": [call("write_file", path="x", content="x")]}])
    agent.editor.permission_answers = ["never"]
    sid = await agent.new_session(tmp_path)
    prompt = asyncio.create_task(agent.conn.prompt(session_id=sid, prompt=text("go")))
    await asyncio.wait_for(agent.editor.asked.wait(), 10)
    await agent.conn.cancel(session_id=sid)
    assert (await asyncio.wait_for(prompt, 5)).stop_reason == "cancelled"
    cancels = [json.loads(line) for line in agent.lines if b"$/cancel_request" in line]
    assert cancels and "requestId" in cancels[0]["params"]


async def test_a_second_prompt_while_busy_is_refused(start: Any, tmp_path: Path) -> None:
    # A model that takes a minute: the first turn runs until cancelled, however slow the
    # machine (half a second was outlasted on a loaded one).
    agent = await start([{"text": "slow", "delayMs": 60_000}])
    sid = await agent.new_session(tmp_path)
    first = asyncio.create_task(agent.conn.prompt(session_id=sid, prompt=text("one")))
    await agent.editor.wait_for("session_info_update")  # the turn titled the session
    with pytest.raises(acp.RequestError, match="already running"):
        await agent.conn.prompt(session_id=sid, prompt=text("two"))
    await agent.conn.cancel(session_id=sid)
    assert (await first).stop_reason == "cancelled"


async def test_failed_turn_explains_itself_and_ends_end_turn(start: Any, tmp_path: Path) -> None:
    agent = await start(
        models=[
            {
                "id": "down",
                "provider": "openai",
                "baseUrl": "http://127.0.0.1:9/v1",
                "apiKey": "sk-x",
            }
        ],
        defaultModel="down",
        modes=False,
    )
    sid = await agent.new_session(tmp_path)
    result = await agent.conn.prompt(session_id=sid, prompt=text("hi"))
    assert result.stop_reason == "end_turn"
    assert "cannot connect" in agent.editor.text(sid)


async def test_load_replays_the_newest_500_messages_bounded_in_size(
    start: Any, home: Path, tmp_path: Path
) -> None:
    agent = await start()
    store = SqliteStore(home / "data" / "raven.db")
    record = store.create(str(tmp_path), face="test", model="scripted")
    store.append(record.id, user_text("x" * 40_000))
    for i in range(599):
        store.append(record.id, user_text(f"u{i}") if i % 2 else AssistantMessage(text=f"a{i}"))
    store.close()
    result = await agent.conn.load_session(cwd=str(tmp_path), session_id=record.id, mcp_servers=[])
    assert result is not None
    replayed = [u for s, u in agent.editor.updates if s == record.id]
    assert len(replayed) == 500
    assert replayed[-1].content.text == "a598"
    assert replayed[0].content.text == "u99"
    assert all(len(u.content.text.encode()) <= 16 * 1024 + 64 for u in replayed)
    # the replay is complete before the response: a prompt now continues the history
    await agent.conn.prompt(session_id=record.id, prompt=text("after load"))
    assert agent.editor.text(record.id).endswith("after load")


async def test_long_messages_are_capped_in_replay(start: Any, home: Path, tmp_path: Path) -> None:
    agent = await start()
    store = SqliteStore(home / "data" / "raven.db")
    record = store.create(str(tmp_path), face="test", model="scripted")
    store.append(record.id, user_text("y" * 40_000))
    store.close()
    await agent.conn.load_session(cwd=str(tmp_path), session_id=record.id, mcp_servers=[])
    (update,) = agent.editor.of("user_message_chunk", record.id)
    assert len(update.content.text.encode()) < 17 * 1024 and "not replayed" in update.content.text


async def test_load_and_resume_unknown_sessions_are_resource_not_found(
    start: Any, tmp_path: Path
) -> None:
    agent = await start()
    for method in (agent.conn.load_session, agent.conn.resume_session):
        with pytest.raises(acp.RequestError) as info:
            await method(cwd=str(tmp_path), session_id="ses_nope", mcp_servers=[])
        assert info.value.code == -32002


async def test_resume_does_not_replay(start: Any, tmp_path: Path) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("first"))
    agent2 = await start()
    await agent2.conn.resume_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert agent2.editor.updates == []
    await agent2.conn.prompt(session_id=sid, prompt=text("second"))
    assert agent2.editor.text(sid) == "second"


async def test_fork_keeps_the_transcript_or_its_first_turns_and_outlives_the_process(
    start: Any, tmp_path: Path
) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("first"))
    await agent.conn.prompt(session_id=sid, prompt=text("second"))
    whole = await agent.conn.fork_session(session_id=sid, cwd=str(tmp_path), mcp_servers=[])
    early = await agent.conn.fork_session(
        session_id=sid, cwd=str(tmp_path), mcp_servers=[], raven={"turns": 1}
    )
    assert len({sid, whole.session_id, early.session_id}) == 3
    assert whole.config_options  # a session like any other: its mode and model pickers
    await agent.conn.prompt(session_id=early.session_id, prompt=text("third"))  # on its own
    assert await agent.close() == 0

    later = await start()  # a new process, as after a restart
    for forked, said in [(whole.session_id, "firstsecond"), (early.session_id, "firstthird")]:
        await later.conn.load_session(cwd=str(tmp_path), session_id=forked, mcp_servers=[])
        assert later.editor.text(forked, "user_message_chunk") == said
    await later.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert later.editor.text(sid, "user_message_chunk") == "firstsecond"  # unchanged
    listed = {s.session_id: s.field_meta for s in (await later.conn.list_sessions()).sessions}
    assert (
        listed[whole.session_id] == listed[early.session_id] == {"raven": {"parentSessionId": sid}}
    )
    assert listed[sid] is None
    with pytest.raises(acp.RequestError) as missing:
        await later.conn.fork_session(session_id="ses_gone", cwd=str(tmp_path), mcp_servers=[])
    assert missing.value.code == -32002


async def test_list_pages_newest_first_with_cwd_filter(
    start: Any, home: Path, tmp_path: Path
) -> None:
    agent = await start()
    store = SqliteStore(home / "data" / "raven.db")
    other = tmp_path / "other"
    other.mkdir()
    ids = [store.create(str(tmp_path if i % 3 else other), face="test").id for i in range(60)]
    store.update(ids[5], title="titled")
    store.close()
    first = await agent.conn.list_sessions()
    assert len(first.sessions) == 50 and first.next_cursor
    second = await agent.conn.list_sessions(cursor=first.next_cursor)
    assert second.next_cursor is None
    listed = [s.session_id for s in first.sessions + second.sessions]
    assert listed[0] == ids[5] and sorted(listed) == sorted(ids)
    assert first.sessions[0].title == "titled"
    filtered = await agent.conn.list_sessions(cwd=str(other))
    assert {s.cwd for s in filtered.sessions} == {str(other)} and len(filtered.sessions) == 20
    with pytest.raises(acp.RequestError) as info:
        await agent.conn.list_sessions(cursor="garbage")
    assert info.value.code == -32602


async def test_close_refuses_prompts_until_resumed(start: Any, tmp_path: Path) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    await agent.conn.close_session(session_id=sid)
    with pytest.raises(acp.RequestError, match="closed"):
        await agent.conn.prompt(session_id=sid, prompt=text("hello?"))
    await agent.conn.resume_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    assert (await agent.conn.prompt(session_id=sid, prompt=text("back"))).stop_reason == "end_turn"


async def test_delete_is_idempotent_and_removes_from_list(start: Any, tmp_path: Path) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("doomed"))
    assert await agent.request("session/delete", {"sessionId": sid}) == {}
    assert await agent.request("session/delete", {"sessionId": sid}) == {}
    assert sid not in [s.session_id for s in (await agent.conn.list_sessions()).sessions]
    with pytest.raises(acp.RequestError):
        await agent.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])


async def test_set_mode_switches_policy_and_announces_it(start: Any, tmp_path: Path) -> None:
    agent = await start(
        [{"toolCalls": [call("write_file", path="auto.txt", content="a")]}, {"text": "ok"}]
    )
    sid = await agent.new_session(tmp_path)
    await agent.conn.set_session_mode(session_id=sid, mode_id="auto")
    (update,) = agent.editor.of("config_option_update")
    assert {o.id: o.current_value for o in update.config_options}["mode"] == "auto"
    await agent.conn.prompt(session_id=sid, prompt=text("write"))
    assert (tmp_path / "auto.txt").exists() and agent.editor.permissions == []
    with pytest.raises(acp.RequestError, match="Unknown mode"):
        await agent.conn.set_session_mode(session_id=sid, mode_id="turbo")


async def test_mode_as_config_option_sends_current_mode_update(start: Any, tmp_path: Path) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    result = await agent.conn.set_config_option(config_id="mode", session_id=sid, value="auto")
    assert {o.id: o.current_value for o in result.config_options}["mode"] == "auto"
    assert agent.editor.of("current_mode_update")[0].current_mode_id == "auto"


async def test_model_switch_mid_session(start: Any, tmp_path: Path) -> None:
    agent = await start([{"text": "scripted says hi"}])
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("one"))
    result = await agent.conn.set_config_option(config_id="model", session_id=sid, value="echo")
    assert {o.id: o.current_value for o in result.config_options}["model"] == "echo"
    await agent.conn.prompt(session_id=sid, prompt=text("two words"))
    assert agent.editor.text(sid) == "scripted says hitwo words"
    with pytest.raises(acp.RequestError, match="Unknown model"):
        await agent.conn.set_config_option(config_id="model", session_id=sid, value="gpt-9")


async def test_steer_joins_a_running_turn(start: Any, tmp_path: Path, home: Path) -> None:
    agent = await start(
        [
            {"text": "working", "waitFor": "gate", "toolCalls": [call("list_dir")]},
            {"text": "steered"},
        ]
    )
    sid = await agent.new_session(tmp_path)
    idle = await agent.conn.ext_method("raven/session/steer", {"sessionId": sid, "text": "x"})
    assert idle == {"status": "no_turn"}
    prompt = asyncio.create_task(agent.conn.prompt(session_id=sid, prompt=text("go")))
    await agent.editor.wait_for("session_info_update")  # the turn titled the session
    steered = await agent.conn.ext_method(
        "raven/session/steer", {"sessionId": sid, "text": "check the tests too"}
    )
    assert steered == {"status": "injected"}
    # The steering extension Claude's and Codex's adapters serve, the same way.
    steering = {
        "sessionId": sid,
        "prompt": [{"type": "text", "text": "and the docs"}],
        "_meta": {"steering": {"idleBehavior": "promptRequired"}},
    }
    assert await agent.request("_session/steering", steering) == {"outcome": "injected"}
    (home / "gate").touch()  # the model answers its first call only now
    await prompt
    idle = await agent.request("_session/steering", steering)
    assert idle == {"outcome": "promptRequired", "reason": "noRunningTurn"}  # send a prompt
    agent2 = await start()
    await agent2.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    users = [u.content.text for u in agent2.editor.of("user_message_chunk")]
    assert users == ["go", "check the tests too", "and the docs"]


async def test_title_slash_command_renames_the_session(start: Any, tmp_path: Path) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("/title Release checklist"))
    assert agent.editor.of("session_info_update")[-1].title == "Release checklist"
    listed = await agent.conn.list_sessions()
    assert listed.sessions[0].title == "Release checklist"


async def test_large_frames_pass_and_oversized_frames_are_refused(
    start: Any, tmp_path: Path
) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    big = "w" * (1536 * 1024)
    result = await agent.conn.prompt(session_id=sid, prompt=text(big))
    assert result.stop_reason == "end_turn"
    assert agent.editor.text(sid) == big
    assert agent.proc.stdin is not None
    agent.proc.stdin.write(
        b'{"jsonrpc":"2.0","id":"huge","method":"x","params":{"p":"'
        + b"z" * (17 * 1024 * 1024)
        + b'"}}\n'
    )
    await agent.proc.stdin.drain()
    listed = await agent.conn.list_sessions()
    assert listed.sessions
    errors = [json.loads(line) for line in agent.lines if b"Frame too large" in line]
    assert errors and errors[0]["error"]["code"] == -32600


async def test_the_plan_reaches_the_editor(start: Any, tmp_path: Path) -> None:
    entries = [{"content": "look", "status": "in_progress", "priority": "high"}]
    agent = await start([{"toolCalls": [call("update_plan", entries=entries)]}, {"text": "ok"}])
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("plan it"))
    (plan,) = agent.editor.of("plan")
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("look", "in_progress", "high")
    ]
    assert agent.editor.permissions == []


async def test_bad_params_get_clear_errors(start: Any, tmp_path: Path) -> None:
    agent = await start()
    sid = await agent.new_session(tmp_path)
    cases = [
        (
            "session/prompt",
            {
                "sessionId": sid,
                "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}],
            },
            -32602,
            "Audio",
        ),
        ("session/prompt", {"sessionId": sid, "prompt": []}, -32602, "empty"),
        (
            "session/prompt",
            {"sessionId": "ses_unknown", "prompt": [{"type": "text", "text": "hi"}]},
            -32002,
            "not open",
        ),
        (
            "session/set_config_option",
            {"sessionId": sid, "configId": "model", "value": True},
            -32602,
            "value id",
        ),
        (
            "session/set_config_option",
            {"sessionId": sid, "configId": "colour", "value": "red"},
            -32602,
            "Unknown config option",
        ),
        ("_raven/session/steer", {"sessionId": "ses_unknown", "text": "x"}, -32002, "not open"),
        ("session/load", {"sessionId": sid}, -32602, "cwd"),
    ]
    for method, params, code, words in cases:
        with pytest.raises(acp.RequestError) as info:
            await agent.request(method, params)
        assert info.value.code == code, (method, info.value)
        assert words in str(info.value), (method, info.value)


async def test_a_failed_permission_request_means_rejected(start: Any, tmp_path: Path) -> None:
    agent = await start(
        [{"toolCalls": [call("write_file", path="e.txt", content="x")]}, {"text": "ok"}]
    )
    agent.editor.permission_answers = ["error"]
    sid = await agent.new_session(tmp_path)
    result = await agent.conn.prompt(session_id=sid, prompt=text("go"))
    assert result.stop_reason == "end_turn"
    assert not (tmp_path / "e.txt").exists()


async def test_a_recognised_key_never_reaches_the_editor_in_any_frame(
    start: Any, env: dict[str, str], tmp_path: Path
) -> None:
    key = "sk-proj-" + "A1b2C3d4" * 4
    plan = [{"content": f"rotate {key}", "status": "pending", "priority": "low"}]
    agent = await start(
        [
            {"toolCalls": [call("write_file", path="k.env", content=f"KEY={key}\n")]},
            {"toolCalls": [call("edit_file", path="k.env", old_text=key, new_text=key + "X")]},
            {"toolCalls": [call("update_plan", entries=plan)]},
            {"toolCalls": [call("ask_user", question=f"Is {key} yours?")]},
            {"toolCalls": [call("read_file", path="k.env")]},
            {"text": f"Your key is {key}."},
        ],
        elicitation=True,
    )
    agent.editor.permission_answers = ["allow_always", "allow_always"]
    agent.editor.elicitation_answers = [
        schema.AcceptElicitationResponse(action="accept", content={"answer": "yes"})
    ]
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text(f"store {key} please"))
    assert (tmp_path / "k.env").read_text() == f"KEY={key}X\n"
    kinds = set(agent.editor.kinds(sid))
    assert {"tool_call", "tool_call_update", "plan", "agent_message_chunk"} <= kinds
    diffs = [c for u in agent.editor.of("tool_call_update") for c in (u.content or [])]
    assert any(c.type == "diff" for c in diffs)
    assert agent.editor.permissions and agent.editor.elicitations
    assert "[REDACTED]" in agent.editor.text(sid)
    await agent.close()

    replay = await RavenAcp.start(env)
    await replay.initialize()
    await replay.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
    await replay.conn.list_sessions()
    assert replay.editor.of("tool_call_update", sid)
    await replay.close()
    for frames in (agent.lines, replay.lines):
        assert frames and not any(key.encode() in line for line in frames)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_a_stop_signal_stops_the_turn_and_its_commands(
    signum: int, start: Any, tmp_path: Path
) -> None:
    shfile, pidfile = tmp_path / "sh", tmp_path / "pid"
    command = f"echo $$ > {shfile}; sleep 60 & echo $! > {pidfile}; wait"
    agent = await start([{"toolCalls": [call("run_command", command=command)]}], defaultMode="auto")
    sid = await agent.new_session(tmp_path)
    prompt = asyncio.create_task(agent.conn.prompt(session_id=sid, prompt=text("sleep")))
    sleeper, shell = await pid_from(pidfile), await pid_from(shfile)
    agent.proc.send_signal(signum)
    assert await asyncio.wait_for(agent.proc.wait(), 10) == 128 + signum
    assert await ended([sleeper, shell])
    await asyncio.wait_for(agent._pump, 10)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(prompt, 5)


async def test_a_delegated_sub_agent_works_as_progress_of_the_delegate_call(
    start: Any, tmp_path: Path
) -> None:
    child_home = tmp_path / "child"
    write = {"name": "write_file", "arguments": {"path": "by-child.txt", "content": "child"}}
    helper = scripted_child(child_home, [{"toolCalls": [write]}, {"text": "Child done."}])
    agent = await start(
        [
            {"toolCalls": [call("delegate", agent="helper", task="write by-child.txt")]},
            {"text": "The helper wrote it."},
        ],
        agents=[helper],
    )
    agent.editor.permission_answers = ["allow_once"]
    sid = await agent.new_session(tmp_path)
    result = await agent.conn.prompt(session_id=sid, prompt=text("delegate it"))
    assert result.stop_reason == "end_turn"
    assert (tmp_path / "by-child.txt").read_text() == "child"
    (asked,) = agent.editor.permissions
    assert asked.tool_call.title.startswith("Delegate to helper")
    progress = [
        c.content.text
        for u in agent.editor.of("tool_call_update", sid)
        if u.status == "in_progress"
        for c in (u.content or [])
        if c.type == "content"
    ]
    # The child's tool calls, then what it says, as the delegate call's live content.
    assert progress == [
        "helper: → Write by-child.txt",
        "helper: ✓ Write by-child.txt",
        "helper: Child done.",
    ]
    # The call's title follows the child's tool call, and comes back once it is done.
    titles = [u.title for u in agent.editor.of("tool_call_update", sid) if u.title]
    assert titles == [
        f"{asked.tool_call.title} · helper: Write by-child.txt",
        asked.tool_call.title,
    ]
    done = [u for u in agent.editor.of("tool_call_update", sid) if u.status == "completed"]
    final = done[-1].content[0].content.text
    assert final.startswith("Child done.") and "allow always: Write by-child.txt" in final
    assert agent.editor.text(sid).endswith("The helper wrote it.")
    assert await agent.close() == 0
    leftovers = subprocess.run(
        ["pgrep", "-f", str(child_home / "config.json")], capture_output=True, text=True
    )
    assert leftovers.stdout == ""


async def delegate_in_auto_mode(
    start: Any, tmp_path: Path, child_call: dict[str, Any], escalated: str, answer: str
) -> tuple[Any, str, Any]:
    """A turn in mode `auto` (the delegate call unasked) handing a task to a child whose
    one call, of kind `escalated`, a rule escalates; the editor answers it `answer`.
    Returns the editor's connection, the session id and the prompt's result."""
    helper = scripted_child(
        tmp_path / "child",
        [{"toolCalls": [child_call]}, {"text": "Child did it."}],
        rules=[{"kind": [escalated], "action": "escalate"}],
    )
    agent = await start(
        [{"toolCalls": [call("delegate", agent="helper", task="do it")]}, {"text": "Done."}],
        agents=[helper],
    )
    agent.editor.permission_answers = [answer]
    sid = await agent.new_session(tmp_path)
    await agent.conn.set_session_mode(session_id=sid, mode_id="auto")
    result = await agent.conn.prompt(session_id=sid, prompt=text("delegate it"))
    return agent, sid, result


async def test_a_rule_escalates_a_childs_command_to_the_editor_even_in_an_auto_mode(
    start: Any, tmp_path: Path
) -> None:
    run = {"name": "run_command", "arguments": {"command": "echo from-child > made.txt"}}
    agent, sid, result = await delegate_in_auto_mode(start, tmp_path, run, "execute", "allow_once")
    assert result.stop_reason == "end_turn"
    (asked,) = agent.editor.permissions  # only the child's command reached the person
    assert asked.tool_call.title == "helper: Run `echo from-child > made.txt`"
    assert asked.tool_call.raw_input == {"command": "echo from-child > made.txt"}
    assert (tmp_path / "made.txt").read_text() == "from-child\n"
    done = [u for u in agent.editor.of("tool_call_update", sid) if u.status == "completed"]
    told = done[-1].content[0].content.text
    assert "allow once: Run `echo from-child > made.txt` (by you)" in told


async def test_an_escalated_childs_edit_reaches_the_editor_with_its_diff(
    start: Any, tmp_path: Path
) -> None:
    write = {"name": "write_file", "arguments": {"path": "notes.md", "content": "- eggs\n"}}
    agent, _, result = await delegate_in_auto_mode(start, tmp_path, write, "edit", "reject_once")
    assert result.stop_reason == "end_turn"
    (asked,) = agent.editor.permissions
    (change,) = asked.tool_call.content  # the person sees what they would allow
    assert change.type == "diff" and change.new_text == "- eggs\n"
    assert change.path.endswith("notes.md") and change.old_text is None
    assert not (tmp_path / "notes.md").exists()


SPLIT_KEY = "sk-proj-" + "Zq7" * 8


async def test_a_key_streamed_in_sub_word_pieces_reaches_the_editor_masked(
    start: Any, tmp_path: Path, model_server: FakeModelServer, env: dict[str, str]
) -> None:
    env["TEST_KEY"] = "k"
    model = {
        "id": "gpt",
        "provider": "openai",
        "model": "gpt-x",
        "baseUrl": model_server.url + "/v1",
        "apiKeyEnv": "TEST_KEY",
    }
    agent = await start(models=[model], defaultModel="gpt")
    answer = f"Your key is {SPLIT_KEY} and Authorization: Bearer {SPLIT_KEY[3:]} ok"
    model_server.queue(Reply(events=openai_stream(text=answer, chunk_chars=3)))
    sid = await agent.new_session(tmp_path)
    await agent.conn.prompt(session_id=sid, prompt=text("what is my key?"))
    shown = agent.editor.text(sid)
    assert shown.startswith("Your key is [REDACTED] and") and shown.endswith(" ok")
    assert not any(SPLIT_KEY[i : i + 6] in shown for i in range(len(SPLIT_KEY) - 5))


async def test_an_editor_that_shows_compactions_sees_them_live_and_replayed(
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    model_server: FakeModelServer,
) -> None:
    """The official TypeScript SDK's client, declaring `session.compaction`, drives a
    long session against a model server that refuses what passes its context: no
    request passes it, and each compaction comes as `compaction_update` (in progress,
    then completed) with the summary streamed as `compaction_summary_chunk`."""
    script = Path(__file__).parent / "compacting_editor.mjs"
    folder = npm_install(tmp_path_factory, TS_SDK, beside=[script])
    model_server.context_tokens = WINDOW
    model_server.replies = [compacting_model] * 1000
    write_config(
        home,
        {
            "models": [
                {
                    "id": "local",
                    "provider": "openai",
                    "baseUrl": model_server.url + "/v1",
                    "contextWindow": WINDOW,
                }
            ],
            "defaultModel": "local",
        },
    )
    command = json.dumps([*RAVEN, "acp"])
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(folder / script.name),
        command,
        str(tmp_path),
        "40",
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0
    seen = json.loads(out)
    assert seen["stops"] == ["end_turn"] * 40
    answering = [r.body for r in model_server.requests if not summarising(r.body)]
    assert max(request_tokens(b) for b in answering) <= WINDOW
    assert "plum" in answering[-1]["messages"][0]["content"]  # the summary carried it
    updates = [u for u in seen["live"] if u["sessionUpdate"].startswith("compaction")]
    ids = list(dict.fromkeys(u["compactionId"] for u in updates))
    assert len(ids) >= 2
    for compaction_id in ids:
        mine = [u for u in updates if u["compactionId"] == compaction_id]
        assert [u["status"] for u in mine if u["sessionUpdate"] == "compaction_update"] == [
            "in_progress",
            "completed",
        ]
        streamed = "".join(
            u["content"]["text"] for u in mine if u["sessionUpdate"] == "compaction_summary_chunk"
        )
        assert mine[-1]["summary"] == [{"type": "text", "text": streamed.strip()}]
    # Nothing about compaction in the answers: the editor shows it itself.
    assert not any("Compacted" in u.get("content", {}).get("text", "") for u in seen["live"])
    replayed = [u for u in seen["replayed"] if u["sessionUpdate"] == "compaction_update"]
    assert replayed and all(u["status"] == "completed" and u["summary"] for u in replayed)

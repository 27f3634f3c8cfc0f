"""Raven's ACP client driving real agents over pipes: another `raven acp`, and small agents on
the official ACP SDK that misbehave in the ways sub-agents do."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from acp import schema

from raven.acp_client import AgentsSource, SubAgent, SubAgentError
from raven.acp_client import agent as agent_module
from raven.acp_client.agent import Outcome
from raven.config import AgentSpec, Limits
from raven.tools import (
    ChildSubagent,
    ChildText,
    ChildToolCall,
    FileDiff,
    Permission,
    Progress,
    Question,
    ToolContext,
    ToolError,
)
from tests.acp_schema import AcpSchema, Version
from tests.conftest import RAVEN
from tests.npm import npm_install
from tests.processes import ended, group_gone, pid_from

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes

SDK_AGENT = Path(__file__).with_name("sdk_agent.py")


def sdk_spec(behaviour: str, *extra: str, **fields: Any) -> AgentSpec:
    fields.setdefault("name", f"sdk-{behaviour}")
    return AgentSpec(command=sys.executable, args=[str(SDK_AGENT), behaviour, *extra], **fields)


async def drive(spec: AgentSpec, cwd: Path, **callbacks: Any) -> tuple[Any, list[Progress], int]:
    """One task through a fresh `SubAgent`; (outcome, progress seen, the child's pid)."""
    seen: list[Progress] = []
    agent = SubAgent(spec, cwd)
    await agent.start()
    assert agent._child is not None
    pid = agent._child.proc.pid
    try:
        outcome = await agent.prompt("go", seen.append, **callbacks)
    finally:
        await agent.stop()
    assert group_gone(pid)
    return outcome, seen, pid


def calls_of(seen: list[Progress]) -> list[str]:
    """The progress lines of the child's tool calls (not of what it says)."""
    return [p.text for p in seen if isinstance(p.detail, ChildToolCall)]


@pytest.fixture
def child_raven(tmp_path: Path) -> AgentSpec:
    """A `raven acp` whose scripted model writes a file (asking first), then says so."""
    home = tmp_path / "child"
    home.mkdir()
    steps = [
        {"toolCalls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi"}}]},
        {"text": "I wrote out.txt."},
    ]
    (home / "script.json").write_text(json.dumps(steps))
    (home / "config.json").write_text(
        json.dumps(
            {
                "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
                "modes": [{"id": "ask", "name": "Ask"}],
                "defaultMode": "ask",
            }
        )
    )
    return AgentSpec(
        name="helper",
        command=RAVEN[0],
        args=[*RAVEN[1:], "acp", "--config", str(home / "config.json")],
    )


async def test_a_childs_own_sub_agent_shows_as_progress_under_both_names(
    tmp_path: Path,
) -> None:
    """Raven declares `subagents`, so a child announces its own sub-agent (`subagent_update`)
    and streams it as a session of its own: its work is progress (`helper › writer`), never
    the child's answer."""
    outcome, seen, _ = await drive(sdk_spec("grandchild", name="helper"), tmp_path)
    assert outcome.answer == "Done."
    lines = [p.text for p in seen]
    assert lines == [
        "helper › writer: say hello",
        "helper → helper › writer: Task for writer:",
        "helper › writer: → Read notes.txt",
        "helper › writer: Grandchild says hello.",
        "helper › writer: ended (end_turn)",
        "helper: Done.",
    ]
    said = [p.detail for p in seen if isinstance(p.detail, ChildText)]
    assert said[0] == ChildText(
        "helper › writer", "Grandchild says hello.", "Grandchild says hello.", "s1/task-1"
    )
    states = [p.detail for p in seen if isinstance(p.detail, ChildSubagent)]
    assert states == [
        ChildSubagent("helper › writer", "s1/task-1", "running", description="say hello"),
        ChildSubagent("helper › writer", "s1/task-1", "idle", "end_turn"),
    ]


@pytest.mark.parametrize(
    ("policy", "written", "decision"),
    [
        ("auto", True, "allow once: Write late.txt (by auto)"),
        ("read-only", False, "reject once: Write late.txt (by read-only)"),
    ],
)
async def test_a_childs_sub_agent_asking_after_the_childs_answer_is_still_answered(
    policy: str, written: bool, decision: str, tmp_path: Path
) -> None:
    """codex answers its prompt before the sub-agents it spawned have asked for what they
    need: the task stays open until they end, and Raven's rules answer them as the
    child's own."""
    spec = sdk_spec("late-grandchild", name="helper", permissions=policy)
    outcome, seen, _ = await drive(spec, tmp_path)
    assert outcome.answer == "Started a writer."
    assert (tmp_path / "late.txt").exists() is written
    assert outcome.decisions == [decision]
    assert "helper › writer: ended (end_turn)" in [p.text for p in seen]


async def test_a_late_request_from_a_childs_sub_agent_reaches_the_person(
    tmp_path: Path,
) -> None:
    asked: list[Permission] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "allow_once"

    rules = [{"kind": ["edit"], "action": "escalate"}]
    spec = sdk_spec("late-grandchild", name="helper", rules=rules)
    outcome, _, _ = await drive(spec, tmp_path, approve=approve)
    assert [a.title for a in asked] == ["helper › writer: Write late.txt"]
    assert (tmp_path / "late.txt").read_text() == "late"
    assert outcome.decisions == ["allow once: Write late.txt (by you)"]


async def test_a_childs_sub_agent_that_never_ends_holds_the_task_only_so_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_module, "LATE_WORK_S", 1.0)
    spec = sdk_spec("late-grandchild", "stuck", name="helper")
    outcome, _, _ = await drive(spec, tmp_path)
    assert (tmp_path / "late.txt").exists()  # what it asked in time was answered
    assert outcome.decisions == [
        "allow once: Write late.txt (by auto)",
        "stopped waiting after 1s for helper › writer",
    ]


async def test_a_child_that_exits_with_its_sub_agent_running_ends_the_wait_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_module, "LATE_WORK_S", 600.0)
    spec = sdk_spec("late-grandchild", "dies", name="helper")
    async with asyncio.timeout(30):  # not the 600 s the wait would allow
        outcome, _, _ = await drive(spec, tmp_path)
    assert outcome.answer == "Started a writer." and outcome.decisions == []
    assert not (tmp_path / "late.txt").exists()


async def test_raven_drives_raven_and_allows_always_unattended(
    child_raven: AgentSpec, tmp_path: Path
) -> None:
    outcome, seen, _ = await drive(child_raven, tmp_path)
    assert outcome.answer == "I wrote out.txt." and outcome.stop_reason == "end_turn"
    assert (tmp_path / "out.txt").read_text() == "hi"
    assert outcome.decisions == ["allow always: Write out.txt (by auto)"]
    assert calls_of(seen) == ["helper: → Write out.txt", "helper: ✓ Write out.txt"]
    said = [p for p in seen if isinstance(p.detail, ChildText)]  # what the child says, too
    assert said[-1].text == "helper: I wrote out.txt."
    assert said[-1].detail == ChildText("helper", "I wrote out.txt.", "I wrote out.txt.")
    assert isinstance(seen[0].detail, ChildToolCall) and seen[0].detail.kind == "edit"


@pytest.mark.parametrize(
    ("behaviour", "policy", "answer"),
    [
        ("allow-once", "auto", "outcome opt-allow_once"),
        ("reject-only", "auto", "outcome opt-reject_once"),
        ("read-exec", "read-only", "execute opt-reject_once, read opt-allow_always"),
        ("read-exec", "ask", "execute opt-reject_once, read opt-reject_once"),  # nobody to ask
        ("read-exec", "auto-once", "execute opt-allow_once, read opt-allow_once"),
        ("elicit", "auto", "elicitation decline None"),
    ],
)
async def test_permission_policies_pick_only_offered_options(
    behaviour: str, policy: str, answer: str, tmp_path: Path
) -> None:
    outcome, _, _ = await drive(sdk_spec(behaviour, permissions=policy), tmp_path)
    assert outcome.answer == answer


def requests_spec(calls: list[dict[str, Any]], **fields: Any) -> AgentSpec:
    return sdk_spec("requests", json.dumps(calls), **fields)


DISGUISED = {"title": "Read notes", "kind": "read", "rawInput": {"command": "rm -rf ~"}}
READ = {"title": "Read notes", "kind": "read", "locations": ["notes.md"]}


async def test_a_request_is_judged_by_what_it_does_not_by_its_label(tmp_path: Path) -> None:
    spec = requests_spec([DISGUISED, READ], permissions="read-only")
    outcome, _, _ = await drive(spec, tmp_path)
    assert outcome.answer == "opt-reject_once, opt-allow_always"  # the "read" that runs rm
    assert outcome.decisions[0] == (
        "reject once: Read notes (by read-only; judged execute, labelled read)"
    )


@pytest.mark.parametrize(
    ("rules", "granted"),
    [([], "opt-allow_always"), ([{"paths": "outside", "action": "reject"}], "opt-allow_once")],
)
async def test_with_rules_the_preset_grants_once_so_the_rules_see_the_next_request(
    rules: list[dict[str, Any]], granted: str, tmp_path: Path
) -> None:
    """An "always" lets the agent skip asking next time (gemini leaves the mode that asks),
    and the next request may be one a rule rejects."""
    edit = {"title": "Edit code", "kind": "edit", "locations": [str(tmp_path / "a.py")]}
    spec = requests_spec([edit], permissions="auto", rules=rules)
    outcome, _, _ = await drive(spec, tmp_path)
    assert outcome.answer == granted
    assert outcome.decisions[0].endswith("Edit code (by auto)")


async def test_rules_decide_in_order_before_the_preset(tmp_path: Path) -> None:
    calls = [
        {"title": "Run git", "kind": "execute", "rawInput": {"command": "git status"}},
        {"title": "Run git", "kind": "execute", "rawInput": {"command": "git status; rm -rf /"}},
        {"title": "Run npm", "kind": "execute", "rawInput": {"command": ["npm", "test"]}},
        {"title": "Edit passwd", "kind": "edit", "locations": ["/etc/passwd"]},
        {"title": "Edit code", "kind": "edit", "locations": [str(tmp_path / "a.py")]},
        {"title": "Edit link", "kind": "edit", "locations": ["out/../../escape.py"]},
    ]
    rules = [
        {"kind": ["execute"], "commands": ["git", "pytest"], "action": "allow"},
        {"kind": ["execute"], "action": "reject"},
        {"paths": "outside", "action": "reject"},
        {"kind": ["edit"], "paths": "inside", "action": "allow"},
    ]
    spec = requests_spec(calls, permissions="auto", rules=rules)
    outcome, _, _ = await drive(spec, tmp_path)
    assert outcome.answer.split(", ") == [
        "opt-allow_once",  # an allow-listed program, allowed once: asked again next time
        "opt-reject_once",  # the same program with a second command behind it
        "opt-reject_once",
        "opt-reject_once",  # outside the working directory
        "opt-allow_once",
        "opt-reject_once",  # `..` out of it
    ]
    assert [d.rsplit("(", 1)[1] for d in outcome.decisions] == [
        "by rule 1)",
        "by rule 2)",
        "by rule 2)",
        "by rule 3)",
        "by rule 4)",
        "by rule 3)",
    ]


async def test_an_escalation_asks_the_person_and_no_answer_rejects(tmp_path: Path) -> None:
    asked: list[Permission] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "allow_once" if len(asked) == 1 else None

    command = {"title": "Run make", "kind": "execute", "rawInput": {"command": "make deploy"}}
    rules = [{"kind": ["execute"], "action": "escalate"}]
    spec = requests_spec([command, command], rules=rules, name="helper")
    outcome, _, _ = await drive(spec, tmp_path, approve=approve)
    assert outcome.answer == "opt-allow_once, opt-reject_once"
    first = asked[0]
    assert first.person and first.title == "helper: Run make" and first.kind == "execute"
    assert first.preview == "make deploy"  # what will run, beside the question
    assert outcome.decisions == [
        "allow once: Run make (by you)",
        "reject once: Run make (no answer: rejected)",
    ]
    alone, _, _ = await drive(spec, tmp_path)  # nobody to ask (no parent face): fail closed
    assert alone.answer == "opt-reject_once, opt-reject_once"
    assert alone.decisions[0] == "reject once: Run make (nobody to ask: rejected)"


async def test_an_escalated_edit_shows_the_person_the_childs_change(tmp_path: Path) -> None:
    asked: list[Permission] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "reject_once"

    target = str(tmp_path / "notes.md")
    edit = {
        "title": "Edit notes.md",
        "kind": "edit",
        "rawInput": {"file_path": target},
        "diffs": [{"path": target, "oldText": "- milk\n", "newText": "- milk\n- eggs\n"}],
    }
    spec = requests_spec([edit], rules=[{"kind": ["edit"], "action": "escalate"}])
    outcome, _, _ = await drive(spec, tmp_path, approve=approve)
    assert outcome.answer == "opt-reject_once"
    (seen,) = asked
    assert seen.preview == FileDiff(Path(target), "- milk\n", "- milk\n- eggs\n")
    assert seen.raw_input == {"file_path": target}


async def test_a_consent_is_never_given_by_a_preset_or_a_rule(tmp_path: Path) -> None:
    """A URL sign-in relayed as a fetch (codex-acp's way with an MCP server's URL
    elicitation) and a mode switch go to a person under every preset; with nobody to ask
    they are rejected. A plain fetch is still a read."""
    consent = {"title": "Elicitation: sign in to GitHub", "kind": "fetch", "rawInput": {}}
    switch = {"title": "Leave plan mode", "kind": "switch_mode", "rawInput": {}}
    url = "https://example.com/docs"
    fetch = {"title": f"Fetch {url}", "kind": "fetch", "rawInput": {"url": url}}
    allow_all = [{"kind": ["fetch", "switch_mode"], "action": "allow"}]
    for permissions in ("auto", "auto-once", "read-only"):
        spec = requests_spec([consent, switch, fetch], permissions=permissions, rules=allow_all)
        alone, _, _ = await drive(spec, tmp_path)
        assert alone.answer == "opt-reject_once, opt-reject_once, opt-allow_once", permissions
        assert alone.decisions[0] == (
            "reject once: Elicitation: sign in to GitHub (nobody to ask: rejected)"
        )
    asked: list[Permission] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "allow_once"

    spec = requests_spec([consent], permissions="auto", name="helper")
    outcome, _, _ = await drive(spec, tmp_path, approve=approve)
    assert outcome.answer == "opt-allow_once" and asked[0].person
    assert asked[0].title == "helper: Elicitation: sign in to GitHub"


async def test_a_url_consent_is_given_only_by_a_person_shown_the_page(tmp_path: Path) -> None:
    """Raven declares URL elicitation, so a child's sign-in comes as one (not as a `fetch`
    an auto preset would allow): declined under every preset and rule with nobody to
    ask; accepted only when the person allows it, once."""
    allow_all = [{"kind": ["fetch"], "action": "allow"}]
    for permissions in ("auto", "auto-once", "read-only", "ask"):
        spec = sdk_spec("url-consent", permissions=permissions, rules=allow_all)
        alone, _, _ = await drive(spec, tmp_path)
        assert alone.answer == "consent decline", permissions
        assert alone.decisions == [
            "consent declined: sdk-url-consent: Sign in to GitHub (nobody to ask)"
        ]
    asked: list[Permission] = []
    answers = ["reject_once", "allow_once"]

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return answers.pop(0)

    spec = sdk_spec("url-consent", permissions="auto", name="helper")
    refused, _, _ = await drive(spec, tmp_path, approve=approve)
    assert refused.answer == "consent decline"
    given, _, _ = await drive(spec, tmp_path, approve=approve)
    assert given.answer == "consent accept"
    assert given.decisions == ["consent accepted: helper: Sign in to GitHub (by you)"]
    url = "https://github.com/login/oauth/authorize?client_id=raven-test"
    assert asked[0].person and asked[0].offered == ("allow_once", "reject_once")
    assert asked[0].preview == f"open {url}" and asked[0].raw_input == {"url": url}


async def test_a_request_that_says_nothing_of_what_it_does_goes_to_a_person(
    tmp_path: Path,
) -> None:
    blind = {"title": "Do it", "kind": "read"}  # no input, no content, no location
    spec = requests_spec([blind], permissions="auto")
    alone, _, _ = await drive(spec, tmp_path)
    assert alone.answer == "opt-reject_once"
    assert alone.decisions == ["reject once: Do it (nobody to ask: rejected)"]
    asked: list[Permission] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "allow_once"

    outcome, _, _ = await drive(spec, tmp_path, approve=approve)
    assert outcome.answer == "opt-allow_once" and asked[0].person


async def test_ask_forwards_the_childs_options_to_the_person(tmp_path: Path) -> None:
    asked: list[Permission] = []
    questions: list[Question] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "allow_once"

    async def ask(question: Question) -> str:
        questions.append(question)
        return "teal"

    spec = sdk_spec("allow-once", permissions="ask")
    outcome, _, _ = await drive(spec, tmp_path, approve=approve, ask=ask)
    assert outcome.answer == "outcome opt-allow_once"
    (permission,) = asked
    assert permission.offered == ("allow_once", "reject_once")
    assert permission.title == "sdk-allow-once: Do edit" and permission.kind == "edit"
    elicit = sdk_spec("elicit", permissions="ask")
    answered, _, _ = await drive(elicit, tmp_path, approve=approve, ask=ask)
    assert answered.answer == "elicitation accept {'colour': 'teal'}"
    assert questions[0].text == "sdk-elicit asks: Which colour?"


async def test_a_child_that_dies_mid_turn_is_a_clear_error_with_its_stderr(
    tmp_path: Path,
) -> None:
    agent = SubAgent(sdk_spec("crash"), tmp_path)
    await agent.start()
    assert agent._child is not None
    pid = agent._child.proc.pid
    with pytest.raises(SubAgentError, match="exited with code 3") as info:
        await agent.prompt("go", lambda p: None)
    await agent.stop()
    assert "the disk caught fire" in str(info.value)
    assert group_gone(pid)


async def test_a_stderr_flood_does_not_hang_the_turn(tmp_path: Path) -> None:
    outcome, _, _ = await drive(sdk_spec("flood"), tmp_path)
    assert outcome.answer == "survived the flood"


async def test_a_hanging_child_is_cancelled_then_killed_leaving_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("raven.acp_client.agent.CANCEL_GRACE_S", 0.5)
    pidfile = tmp_path / "pid"
    spec = sdk_spec("hang", "stubborn", prompt_timeout_s=1, env={"HANG_PIDFILE": str(pidfile)})
    agent = SubAgent(spec, tmp_path)
    await agent.start()
    with pytest.raises(SubAgentError, match="did not finish within 1s"):
        await agent.prompt("go", lambda p: None)
    hung = await pid_from(pidfile)
    await agent.stop()
    assert await ended([hung], 5) and group_gone(hung)


async def test_an_agent_that_never_answers_initialize_times_out(tmp_path: Path) -> None:
    spec = AgentSpec(name="mute", command="sleep", args=["60"], ready_timeout_s=0.5)
    with pytest.raises(SubAgentError, match=r"did not get ready within 0\.5s"):
        await SubAgent(spec, tmp_path).start()


def context(tmp_path: Path, session_id: str = "s") -> ToolContext:
    async def no_answer(question: Question) -> None:
        return None

    return ToolContext(cwd=tmp_path, limits=Limits(), ask=no_answer, session_id=session_id)


async def test_cli_backends_take_the_task_as_an_argument_or_on_stdin(tmp_path: Path) -> None:
    source = AgentsSource(
        [
            AgentSpec(name="arg", protocol="cli", command="echo", args=["task:", "{task}"]),
            AgentSpec(name="pipe", protocol="cli", command="tr", args=["a-z", "A-Z"]),
            AgentSpec(
                name="bad", protocol="cli", command="sh", args=["-c", "echo oops >&2; exit 4"]
            ),
            AgentSpec(name="deaf", protocol="cli", command="sh", args=["-c", "exit 0"]),
        ]
    )
    ctx = context(tmp_path)
    assert (await source.delegate(ctx, "arg", "two words")).answer == "task: two words"
    assert (await source.delegate(ctx, "pipe", "shout this")).answer == "SHOUT THIS"
    with pytest.raises(ToolError, match="exited with code 4") as info:
        await source.delegate(ctx, "bad", "x")
    assert "oops" in str(info.value)
    # a command that never reads its input (the pipe closes under the task) still answers
    assert (await source.delegate(ctx, "deaf", "x" * 1_000_000)).answer == ""
    await source.aclose()


async def test_two_delegations_to_different_agents_run_together(tmp_path: Path) -> None:
    def meeting(me: str, other: str) -> AgentSpec:
        script = f"touch {me}; while [ ! -f {other} ]; do sleep 0.02; done; echo {me} met {other}"
        return AgentSpec(
            name=me, protocol="cli", command="sh", args=["-c", script], prompt_timeout_s=10
        )

    source = AgentsSource([meeting("a", "b"), meeting("b", "a")])
    ctx = context(tmp_path)
    outcomes = await asyncio.gather(
        source.delegate(ctx, "a", "meet"), source.delegate(ctx, "b", "meet")
    )
    assert [o.answer for o in outcomes] == ["a met b", "b met a"]


async def test_one_child_per_session_reused_and_released(
    child_raven: AgentSpec, tmp_path: Path
) -> None:
    source = AgentsSource([child_raven])
    ctx = context(tmp_path, "parent-1")
    first = await source.delegate(ctx, "helper", "write it")
    child = source._children[("parent-1", "helper")]
    assert child._child is not None
    pid = child._child.proc.pid
    second = await source.delegate(ctx, "helper", "again")
    assert source._children[("parent-1", "helper")] is child
    assert first.answer == "I wrote out.txt." and second.answer  # the same session answered
    await source.release("parent-1")
    assert ("parent-1", "helper") not in source._children and group_gone(pid)
    with pytest.raises(ToolError, match="no sub-agent 'ghost'"):
        await source.delegate(ctx, "ghost", "x")


async def holding_and_beside(
    source: AgentsSource, tmp_path: Path, name: str
) -> tuple[Outcome, Outcome, int]:
    """Two tasks of one parent session for one agent, the second given once the child works
    on the first: their outcomes, and the child's pid."""
    holding = asyncio.Event()

    def progress(update: Progress) -> None:
        if update.text.endswith("holding"):
            holding.set()

    ctx = context(tmp_path, "parent-1")
    await source.delegate(ctx, name, "plan")
    held = asyncio.ensure_future(source.delegate(replace(ctx, progress=progress), name, "hold"))
    async with asyncio.timeout(30):
        await holding.wait()
    beside = await source.delegate(ctx, name, "test")
    child = source._children[("parent-1", name)]._child
    assert child is not None
    return await held, beside, child.proc.pid


async def test_a_task_given_while_the_child_works_runs_beside_it_in_a_fork(
    tmp_path: Path,
) -> None:
    """A child serving session/fork takes the second task in a fork of its session: warm
    (the same process, what it knew before), beside the first, and asking as the session
    does (a fork starting in a mode that does not ask is put in one that does)."""
    source = AgentsSource([sdk_spec("forks")])
    held, beside, pid = await holding_and_beside(source, tmp_path, "sdk-forks")
    assert beside.answer == f"s2 in default, pid {pid}, knows: plan, hold, test; closed: none"
    assert held.answer == f"holding\ns1 in default, pid {pid}, knows: plan, hold; closed: none"
    after = await source.delegate(context(tmp_path, "parent-1"), "sdk-forks", "ship")
    assert after.answer == f"s1 in default, pid {pid}, knows: plan, hold, ship; closed: s2"
    await source.aclose()


async def test_without_fork_a_task_given_while_the_child_works_waits_its_turn(
    tmp_path: Path,
) -> None:
    spec = sdk_spec("forks", "no-fork", env={"HOLD_S": "1"})
    source = AgentsSource([spec])
    held, beside, pid = await holding_and_beside(source, tmp_path, "sdk-forks")
    assert (
        held.answer == f"holding\nalone; s1 in default, pid {pid}, knows: plan, hold; closed: none"
    )
    assert beside.answer == f"s1 in default, pid {pid}, knows: plan, hold, test; closed: none"
    await source.aclose()


async def test_file_system_requests_are_method_not_found(tmp_path: Path) -> None:
    outcome, _, _ = await drive(sdk_spec("fs"), tmp_path)
    assert outcome.answer == "refused -32601"


async def test_cancelling_the_parent_turn_stops_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("raven.acp_client.agent.CANCEL_GRACE_S", 0.5)
    pidfile = tmp_path / "pid"
    spec = sdk_spec("hang", "stubborn", env={"HANG_PIDFILE": str(pidfile)})
    source = AgentsSource([spec])
    work = asyncio.ensure_future(source.delegate(context(tmp_path), spec.name, "go"))
    hung = await pid_from(pidfile)
    work.cancel()
    with pytest.raises(asyncio.CancelledError):
        await work
    assert await ended([hung], 5) and group_gone(hung)
    await source.aclose()


async def test_updates_and_requests_for_a_session_raven_did_not_open_are_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[Permission] = []

    async def approve(permission: Permission) -> Any:
        asked.append(permission)
        return "allow_once"

    spec = sdk_spec("foreign", permissions="ask")
    caplog.set_level(logging.DEBUG, logger="raven.acp_client")
    outcome, _, _ = await drive(spec, tmp_path, approve=approve)
    assert outcome.answer == "own words, foreign ask cancelled, nameless cancelled"
    assert asked == [] and outcome.decisions == []
    logged = [r.getMessage() for r in caplog.records]
    assert (
        "sub-agent sdk-foreign: ignored a session/update for a session Raven did not open" in logged
    )
    assert (
        "sub-agent sdk-foreign: ignored a session/request_permission without a sessionId" in logged
    )
    assert (
        "sub-agent sdk-foreign: ignored a _vendor/hello notification (not one Raven knows)"
        in logged
    )
    assert "sub-agent sdk-foreign: did not show a session/update of kind subagent_update" in logged


OUTBOUND_PARAMS: dict[str, Any] = {
    "initialize": schema.InitializeRequest,
    "session/new": schema.NewSessionRequest,
    "session/prompt": schema.PromptRequest,
    "session/cancel": schema.CancelNotification,
    "session/set_mode": schema.SetSessionModeRequest,
    "session/fork": schema.ForkSessionRequest,
    "session/close": schema.CloseSessionRequest,
}
ANSWERS: dict[str, Any] = {
    "session/request_permission": schema.RequestPermissionResponse,
    "elicitation/create": schema.CreateElicitationResponse,
}


def schema_complete(model: Any, sent: dict[str, Any]) -> None:
    """`sent` parses as `model` and nothing in it was dropped as invalid on the way."""
    parsed = model.model_validate(sent).model_dump(mode="json", by_alias=True, exclude_none=True)
    for key, value in sent.items():
        assert key in parsed, (model.__name__, key)
        if isinstance(value, dict):
            assert set(value) <= set(parsed[key]), (model.__name__, key, value, parsed[key])


PINNED_OUT = {
    "initialize": ("zInitializeRequest", "unstable"),  # `subagents` is the unstable schema's
    "session/new": ("zNewSessionRequest", "stable"),
    "session/set_mode": ("zSetSessionModeRequest", "stable"),
    "session/prompt": ("zPromptRequest", "stable"),
    "session/cancel": ("zCancelNotification", "stable"),
    "session/fork": ("zForkSessionRequest", "unstable"),
    "session/close": ("zCloseSessionRequest", "stable"),
}
PINNED_ANSWERS = {
    "session/request_permission": ("zRequestPermissionResponse", "stable"),
    "elicitation/create": ("zCreateElicitationResponse", "stable"),
}


async def test_every_frame_raven_sends_a_sub_agent_is_schema_complete(
    child_raven: AgentSpec, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """Complete against the Python SDK's models, and read by the pinned schema as the
    TypeScript SDK reads it: a task, then one in a fork of the session, which is closed."""
    script = tmp_path / "child" / "script.json"
    script.write_text(json.dumps([*json.loads(script.read_text()), {"text": "Forked."}]))
    log = tmp_path / "frames.log"
    tapped = child_raven.model_copy(
        update={
            "command": sys.executable,
            "args": [
                "-m",
                "raven.demo.frametap",
                str(log),
                "--",
                child_raven.command,
                *child_raven.args,
            ],
        }
    )
    agent = SubAgent(tapped, tmp_path)
    await agent.start()
    try:
        outcome = await agent.prompt("go", [].append)
        assert agent.forks
        forked = await agent.fork()
        beside = await agent.prompt("again", [].append, session_id=forked)
        await agent.close(forked)
    finally:
        await agent.stop()
    assert outcome.answer == "I wrote out.txt." and beside.answer == "Forked."
    frames = [(line[0], json.loads(line.split(" ", 2)[2])) for line in log.read_text().splitlines()]
    asked = {
        f["id"]: f["method"] for mark, f in frames if mark == "<" and "method" in f and "id" in f
    }
    checked = set()
    pinned: list[tuple[str, Any, Version]] = []
    for mark, frame in frames:
        if mark != ">":
            continue
        assert frame["jsonrpc"] == "2.0"
        if "method" in frame:
            validator, version = PINNED_OUT[frame["method"]]
            pinned.append((validator, frame["params"], version))
        else:
            validator, version = PINNED_ANSWERS[asked[frame["id"]]]
            pinned.append((validator, frame["result"], version))
        if frame.get("method") == "initialize":  # the Python SDK does not know `subagents`
            caps = frame["params"]["clientCapabilities"]
            stable = {k: v for k, v in caps.items() if k != "subagents"}
            frame = {**frame, "params": {**frame["params"], "clientCapabilities": stable}}
        if "method" in frame:
            schema_complete(OUTBOUND_PARAMS[frame["method"]], frame["params"])
            checked.add(frame["method"])
        else:
            schema_complete(ANSWERS[asked[frame["id"]]], frame["result"])
            checked.add(asked[frame["id"]])
    assert checked == {
        "initialize",
        "session/new",
        "session/prompt",
        "session/request_permission",
        "session/fork",
        "session/close",
    }
    read = acp_schema.read(pinned)
    assert [r for r in read if "ok" not in r] == []
    assert read[0]["ok"]["clientCapabilities"]["subagents"] == {}


async def test_a_childs_error_is_shown_in_its_own_words(tmp_path: Path) -> None:
    with pytest.raises(SubAgentError) as refused:
        await drive(sdk_spec("refuse"), tmp_path)
    said = str(refused.value)
    assert "refused the task: Invalid params" in said
    assert "version missing" in said and "-32602" in said


async def test_progress_takes_the_title_a_child_gives_in_an_update(tmp_path: Path) -> None:
    outcome, seen, _ = await drive(sdk_spec("retitle"), tmp_path)
    assert outcome.answer == "wrote it"
    assert calls_of(seen) == [
        "sdk-retitle: → write_file__write_file_1f3a",
        "sdk-retitle: → Write notes.txt",
        "sdk-retitle: ✓ Write notes.txt",
    ]


TS_SDK = "@agentclientprotocol/sdk@2.4.0"


@pytest.fixture(scope="module")
def ts_agent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TypeScript SDK agent beside its own install of the SDK (pinned, from npm)."""
    script = Path(__file__).with_name("ts_agent.mjs")
    return npm_install(tmp_path_factory, TS_SDK, beside=[script]) / script.name


@pytest.mark.parametrize(("policy", "chosen"), [("auto", "always"), ("auto-once", "once")])
async def test_an_agent_on_the_typescript_sdk_is_driven_end_to_end(
    ts_agent: Path, tmp_path: Path, policy: str, chosen: str
) -> None:
    spec = AgentSpec(
        name="ts",
        command="node",
        args=[str(ts_agent)],
        permissions=policy,  # type: ignore[arg-type]
    )
    outcome, seen, _ = await drive(spec, tmp_path)
    assert outcome.answer == f'ts agent got "go", permission {chosen}'
    assert outcome.decisions == [
        f"allow {'always' if chosen == 'always' else 'once'}: Edit notes.txt (by {policy})"
    ]
    assert calls_of(seen) == ["ts: → Edit notes.txt", "ts: ✓ Edit notes.txt"]


EXAMPLES = Path(__file__).with_name("examples")


async def test_the_python_sdks_example_agent_is_driven(tmp_path: Path) -> None:
    spec = AgentSpec(name="example", command=sys.executable, args=[str(EXAMPLES / "agent.py")])
    outcome, seen, _ = await drive(spec, tmp_path)
    assert outcome.answer == "Client sent:go" and outcome.stop_reason == "end_turn"
    assert outcome.decisions == [] and calls_of(seen) == []
    assert [p.text for p in seen] == ["example: Client sent:go"]


@pytest.fixture(scope="module")
def ts_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TypeScript SDK's example agent, run by tsx beside the SDK release it was written for."""
    return npm_install(
        tmp_path_factory,
        "@agentclientprotocol/sdk@0.12.0",
        "tsx@4.23.15",
        beside=[EXAMPLES / "agent.ts"],
    )


async def test_the_typescript_sdks_example_agent_is_driven(
    ts_example: Path, tmp_path: Path
) -> None:
    tsx = ts_example / "node_modules" / ".bin" / "tsx"
    spec = AgentSpec(name="example", command=str(tsx), args=[str(ts_example / "agent.ts")])
    outcome, seen, _ = await drive(spec, tmp_path)
    assert outcome.stop_reason == "end_turn"
    assert outcome.answer.startswith("I'll help you with that.")
    assert outcome.answer.endswith("The changes have been applied.")
    assert outcome.decisions == ["allow once: Modifying critical configuration file (by auto)"]
    assert calls_of(seen) == [
        "example: → Reading project files",
        "example: ✓ Reading project files",
        "example: → Modifying critical configuration file",
        "example: ✓ Modifying critical configuration file",
    ]


@pytest.mark.parametrize("protocol", ["acp", "cli"])
async def test_a_working_directory_that_is_gone_is_said_as_such(
    protocol: str, tmp_path: Path
) -> None:
    from raven.acp_client import AgentsSource
    from raven.config import AgentSpec, Limits
    from raven.tools import ToolContext, ToolError

    async def nobody(question: object) -> None:
        return None

    gone = tmp_path / "gone"
    spec = AgentSpec(name="kid", protocol=protocol, command=sys.executable, args=["-V"])
    ctx = ToolContext(cwd=gone, limits=Limits(), ask=nobody, session_id="s")
    with pytest.raises(ToolError) as failed:
        await AgentsSource([spec]).delegate(ctx, "kid", "anything")
    assert f"its working directory {gone} does not exist" in str(failed.value)
    assert "cannot start" not in str(failed.value)  # the command is there


async def test_a_child_starting_in_a_mode_that_approves_itself_is_kept_in_the_one_that_asks(
    tmp_path: Path,
) -> None:
    """claude-agent-acp starts in Claude's `auto`, codex-acp in `agent`: a child that does not
    ask has not been allowed, so Raven switches it to the mode that asks, and back again
    when the child leaves it."""
    spec = sdk_spec("modes")
    outcome, _, _ = await drive(spec, tmp_path)
    assert outcome.answer == "prompted in default, then in default"
    assert outcome.decisions == ["put back in mode default: it switched itself to auto"]
    configured = sdk_spec("modes", mode="plan")
    outcome, _, _ = await drive(configured, tmp_path)
    assert outcome.answer == "prompted in plan, then in plan"


async def test_a_child_that_keeps_leaving_the_mode_that_asks_is_stopped(tmp_path: Path) -> None:
    agent = SubAgent(sdk_spec("modes", "stubborn"), tmp_path)
    await agent.start()
    assert agent._child is not None
    pid = agent._child.proc.pid
    try:
        with pytest.raises(SubAgentError, match="left the mode that asks") as stopped:
            await agent.prompt("go", lambda _: None)
    finally:
        await agent.stop()
    assert "(default) 4 times" in str(stopped.value)
    assert group_gone(pid)


async def test_a_child_with_no_mode_that_asks_is_refused_naming_the_setting(
    tmp_path: Path,
) -> None:
    for spec, says in [
        (sdk_spec("self-approving"), "declares the modes auto, yolo and none"),
        (sdk_spec("modes", mode="careful"), "its mode 'careful' (agents[].mode) is not one"),
    ]:
        agent = SubAgent(spec, tmp_path)
        with pytest.raises(SubAgentError, match=r"agents\[\]\.mode") as refused:
            await agent.start()
        assert says in str(refused.value) and not agent.is_alive

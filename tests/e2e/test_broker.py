"""Two Raven sub-agents ask each other through the broker, launched as a user launches
Raven: `raven run` delegates to ann, ann asks bob with its `a2a` tool, bob answers, ann
completes with bob's answer; and the same across a parent killed mid-task."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RAVEN, raven, write_config
from tests.e2e.acp_harness import Editor, RavenAcp, said
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream

ASK = "What is your favourite colour?"
TASK = "Ask bob for his favourite colour, then tell me."


def model(server: FakeModelServer) -> dict[str, Any]:
    return {"id": "m", "provider": "openai", "baseUrl": server.url + "/v1", "apiKey": "sk-test"}


def child(home: Path, name: str, server: FakeModelServer) -> dict[str, Any]:
    config = home / f"{name}.json"
    config.write_text(json.dumps({"models": [model(server)], "defaultModel": "m"}))
    return {"name": name, "command": RAVEN[0], "args": [*RAVEN[1:], "acp", "--config", str(config)]}


def call(name: str, args: dict[str, Any]) -> Reply:
    return Reply(events=openai_stream(tool_calls=[("c1", name, json.dumps(args))]))


def last_tool_result(body: dict[str, Any]) -> str:
    return str([m for m in body["messages"] if m["role"] == "tool"][-1]["content"])


def ann_repeats_bob(body: dict[str, Any]) -> Reply:
    """ann's model, given the task's view as the tool's result, says what bob answered."""
    view = json.loads(last_tool_result(body))
    return Reply(events=openai_stream(text=f"Bob says: {view['messages'][-1]['text']}"))


def parent_repeats_ann(body: dict[str, Any]) -> Reply:
    return Reply(events=openai_stream(text=f"Heard: {last_tool_result(body).splitlines()[0]}"))


class Servers:
    """A model server each for the parent, ann and bob."""

    def __init__(self) -> None:
        self.parent, self.ann, self.bob = (FakeModelServer().start() for _ in range(3))

    def stop(self) -> None:
        for server in (self.parent, self.ann, self.bob):
            server.stop()


@pytest.fixture
def servers(home: Path) -> Iterator[Servers]:
    started = Servers()
    try:
        configure(home, started)
        yield started
    finally:
        started.stop()


class Held:
    """A reply that tells the test it was asked for, then waits for `release`."""

    def __init__(self) -> None:
        self.asked, self.release = threading.Event(), threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.asked.set()
        return Reply(events=openai_stream(text="never heard"), held_until=self.release)


def configure(home: Path, servers: Servers) -> None:
    write_config(
        home,
        {
            "models": [model(servers.parent)],
            "defaultModel": "m",
            "agents": [child(home, "ann", servers.ann), child(home, "bob", servers.bob)],
        },
    )


def prompt_text(body: dict[str, Any]) -> str:
    return str([m for m in body["messages"] if m["role"] == "user"][-1]["content"])


def test_ann_asks_bob_through_the_broker_and_completes_with_his_answer(
    env: dict[str, str], tmp_path: Path, servers: Servers
) -> None:
    servers.parent.queue(call("delegate", {"agent": "ann", "task": TASK}), parent_repeats_ann)
    servers.ann.queue(call("a2a", {"action": "send", "to": "bob", "text": ASK}), ann_repeats_bob)
    servers.bob.queue(Reply(events=openai_stream(text="Teal, always teal.")))
    ran = raven("run", "--yes", "-o", "json", "find out bob's colour", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    assert out["answer"].strip() == "Heard: Bob says: Teal, always teal."
    # bob was woken with ann's question, under the task's id.
    asked = prompt_text(servers.bob.requests[0].body)
    task_id = re.search(r"ann gives you task (bt_\w+):", asked)
    assert task_id is not None and ASK in asked
    # ann's model sees the a2a tool, never a token; the result names no secret either.
    spec = next(t for t in servers.ann.requests[0].body["tools"] if t["function"]["name"] == "a2a")
    assert "token" not in json.dumps(spec).lower()
    view = json.loads(last_tool_result(servers.ann.requests[1].body))
    assert set(view) == {"taskId", "from", "to", "state", "messages"}
    assert view["state"] == "completed" and view["taskId"] == task_id[1]
    # The parent's session lists the task, as people read it and as scripts do.
    session = out["sessionId"]
    shown = raven("sessions", "show", session, env=env)
    assert f"{task_id[1]}  ann → bob  completed  {ASK}" in shown.stdout
    data = json.loads(raven("sessions", "show", session, "--json", env=env).stdout)
    assert data["agentTasks"][0]["messages"][-1] == {
        "from": "bob",
        "text": "Teal, always teal.",
    }


def test_a_task_is_read_again_from_the_store_after_the_parent_is_killed_mid_task(
    env: dict[str, str], tmp_path: Path, servers: Servers
) -> None:
    bob_holds = Held()
    try:
        delegate = call("delegate", {"agent": "ann", "task": TASK})
        send = call("a2a", {"action": "send", "to": "bob", "text": ASK, "timeout_s": 120})
        servers.parent.queue(delegate, delegate, parent_repeats_ann)
        servers.ann.queue(send, send, ann_repeats_bob)
        servers.bob.queue(bob_holds, Reply(events=openai_stream(text="Teal, after all.")))
        first = subprocess.Popen(
            [*RAVEN, "run", "--yes", "find out bob's colour"],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert bob_holds.asked.wait(60), "bob was never woken"
        finally:
            first.kill()  # SIGKILL: the parent has no chance to end anything
            first.communicate(timeout=30)
            bob_holds.release.set()
        first_id = re.search(r"task (bt_\w+):", prompt_text(servers.bob.requests[0].body))
        assert first_id is not None

        # The newest sessions in this directory are the children's, which their own Ravens
        # keep: --continue takes the person's.
        listed = json.loads(raven("sessions", "list", "--json", env=env).stdout)
        assert sorted(r["face"] for r in listed) == ["cli", "subagent", "subagent"]
        parent = next(r["id"] for r in listed if r["face"] == "cli")
        again = raven("run", "--yes", "-c", "-o", "json", "go on", env=env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        out = json.loads(again.stdout)
        assert out["answer"].strip() == "Heard: Bob says: Teal, after all."
        # ann's repeated send was the stored task, which bob was given again.
        second_id = re.search(r"task (bt_\w+):", prompt_text(servers.bob.requests[1].body))
        assert second_id is not None and second_id[1] == first_id[1]
        assert out["sessionId"] == parent
        data = json.loads(raven("sessions", "show", parent, "--json", env=env).stdout)
        assert [(t["taskId"], t["state"]) for t in data["agentTasks"]] == [
            (first_id[1], "completed")
        ]
    finally:
        bob_holds.release.set()


async def test_an_editor_sees_the_childrens_task_and_a_cancelled_turn_cancels_it(
    env: dict[str, str], tmp_path: Path, servers: Servers
) -> None:
    bob_holds = Held()
    agent = None
    try:
        servers.parent.queue(call("delegate", {"agent": "ann", "task": TASK}))
        servers.ann.queue(
            call("a2a", {"action": "send", "to": "bob", "text": ASK, "timeout_s": 120})
        )
        servers.bob.queue(bob_holds)
        editor = Editor()
        editor.permission_answers = ["first allow"]  # delegating to ann
        agent = await RavenAcp.start(env, editor)
        await agent.initialize()
        session = await agent.new_session(tmp_path)
        prompt = asyncio.create_task(agent.conn.prompt(session_id=session, prompt=said("go")))
        assert await asyncio.to_thread(bob_holds.asked.wait, 60), "bob was never woken"

        def told() -> bool:
            return "a2a ann → bob" in json.dumps(
                [u.model_dump(mode="json") for u in agent.editor.of("tool_call_update")],
                ensure_ascii=False,
            )

        async with asyncio.timeout(10):  # the task shows as an update of the delegate call
            while not told():
                await asyncio.sleep(0.01)
        await agent.conn.cancel(session_id=session)
        assert (await asyncio.wait_for(prompt, 30)).stop_reason == "cancelled"
        shown = json.loads(raven("sessions", "show", session, "--json", env=env).stdout)
        assert [(t["from"], t["to"], t["state"]) for t in shown["agentTasks"]] == [
            ("ann", "bob", "canceled")
        ]
        # The session's next turn reuses ann and bob, whose tokens are still good.
        servers.parent.queue(call("delegate", {"agent": "ann", "task": TASK}), parent_repeats_ann)
        servers.ann.queue(
            call("a2a", {"action": "send", "to": "bob", "text": "And now?"}), ann_repeats_bob
        )
        servers.bob.queue(Reply(events=openai_stream(text="Now teal.")))
        editor.permission_answers.append("first allow")
        again = await agent.conn.prompt(session_id=session, prompt=said("again"))
        assert again.stop_reason == "end_turn"
        assert "Heard: Bob says: Now teal." in editor.text(session)
    finally:
        bob_holds.release.set()
        if agent is not None:
            await agent.close(30)


def echo_tool_result(body: dict[str, Any]) -> Reply:
    """A model that says what its tool answered, in one line."""
    return Reply(events=openai_stream(text=" ".join(last_tool_result(body).split())[:300]))


def test_a_chain_of_tasks_back_and_forth_stops_at_the_budget_with_a_clear_error(
    env: dict[str, str], home: Path, tmp_path: Path, servers: Servers
) -> None:
    """ann asks bob, bob (working on it) asks ann, ann (in a fork of its session, busy
    waiting on bob) asks bob again: a chain of three, past a budget of two."""
    config = json.loads((home / "config.json").read_text())
    write_config(home, {**config, "broker": {"maxDepth": 2}})

    def send(text: str, to: str) -> Reply:
        return call("a2a", {"action": "send", "to": to, "text": text, "timeout_s": 60})

    servers.parent.queue(call("delegate", {"agent": "ann", "task": TASK}), echo_tool_result)
    servers.ann.queue(send("one", "bob"), send("three", "bob"), echo_tool_result, echo_tool_result)
    servers.bob.queue(send("two", "ann"), echo_tool_result)
    ran = raven("run", "--yes", "-o", "json", "start the chain", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    refusals = [
        last_tool_result(r.body)
        for r in servers.ann.requests
        if any(m["role"] == "tool" for m in r.body["messages"])
    ]
    assert any(r.startswith("chain_budget: this would be a chain of 3 tasks") for r in refusals), (
        refusals
    )
    shown = json.loads(
        raven("sessions", "show", json.loads(ran.stdout)["sessionId"], "--json", env=env).stdout
    )
    chain = sorted((t["from"], t["to"], t["state"]) for t in shown["agentTasks"])
    assert chain == [("ann", "bob", "completed"), ("bob", "ann", "completed")]  # no third


def asks_back(wait_s: float) -> Callable[[dict[str, Any]], Reply]:
    """bob's model, given ann's task, asks which shade, waiting `wait_s` for the answer."""

    def reply(body: dict[str, Any]) -> Reply:
        task_id = re.search(r"task (bt_\w+):", prompt_text(body))
        assert task_id is not None
        back = {"action": "send", "task_id": task_id[1], "text": "Which shade?"}
        return call("a2a", {**back, "timeout_s": wait_s})

    return reply


def ann_follows_up(body: dict[str, Any]) -> Reply:
    """ann's model, told bob asks, answers "Dark."."""
    view = json.loads(last_tool_result(body))
    assert view["state"] == "input-required", view
    return call("a2a", {"action": "send", "task_id": view["taskId"], "text": "Dark."})


def test_the_worker_asks_back_and_the_askers_follow_up_reaches_it(
    env: dict[str, str], tmp_path: Path, servers: Servers
) -> None:
    """bob, given ann's task, asks which shade; ann's follow-up reaches bob's waiting send;
    bob's reply then completes the task."""

    def bob_answers(body: dict[str, Any]) -> Reply:
        view = json.loads(last_tool_result(body))
        return Reply(events=openai_stream(text=f"{view['messages'][-1]['text']} teal it is."))

    servers.parent.queue(call("delegate", {"agent": "ann", "task": TASK}), parent_repeats_ann)
    servers.ann.queue(
        call("a2a", {"action": "send", "to": "bob", "text": ASK}),
        ann_follows_up,
        ann_repeats_bob,
    )
    servers.bob.queue(asks_back(wait_s=30), bob_answers)
    ran = raven("run", "--yes", "-o", "json", "find out bob's shade", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["answer"].strip() == "Heard: Bob says: Dark. teal it is."
    shown = json.loads(
        raven("sessions", "show", json.loads(ran.stdout)["sessionId"], "--json", env=env).stdout
    )
    (task,) = shown["agentTasks"]
    assert [(m["from"], m["text"]) for m in task["messages"]] == [
        ("ann", ASK),
        ("bob", "Which shade?"),
        ("ann", "Dark."),
        ("bob", "Dark. teal it is."),
    ]
    assert task["state"] == "completed"


def test_a_worker_that_asked_and_ended_its_turn_is_woken_by_the_answer(
    env: dict[str, str], tmp_path: Path, servers: Servers
) -> None:
    """bob asks back without waiting and ends its turn; ann's answer wakes bob again, in a
    new turn that says it is ann's answer, and bob's reply completes the task."""

    def bob_hears(body: dict[str, Any]) -> Reply:
        said = prompt_text(body)
        assert re.match(r"ann answers you on task bt_\w+:\n\nDark\.", said), said
        return Reply(events=openai_stream(text="Dark teal it is."))

    servers.parent.queue(call("delegate", {"agent": "ann", "task": TASK}), parent_repeats_ann)
    ask = call("a2a", {"action": "send", "to": "bob", "text": ASK})
    servers.ann.queue(ask, ann_follows_up, ann_repeats_bob)
    servers.bob.queue(asks_back(wait_s=0), Reply(events=openai_stream(text="Asked.")), bob_hears)
    ran = raven("run", "--yes", "-o", "json", "find out bob's shade", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["answer"].strip() == "Heard: Bob says: Dark teal it is."
    assert len(servers.bob.requests) == 3  # two turns: the task, then ann's answer

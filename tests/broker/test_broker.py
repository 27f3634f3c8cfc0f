"""The broker over a real SQLite store and its real channel: who may ask whom, the state
machine, the bounds, and a task that outlives the process that held it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from raven.broker.broker import OWNER, Broker
from raven.broker.channel import Channel, ask
from raven.broker.task import MAX_HISTORY, MAX_TEXT_CHARS, BrokerError, BrokerTask
from raven.config import AgentSpec, BrokerConfig, Paths, SessionsConfig
from raven.sessions import Sessions, open_sessions
from raven.sessions.tasks import TaskFilter

AGENTS = [
    AgentSpec(name="ann", command="x", description="plans"),
    AgentSpec(name="bob", command="x", description="knows colours"),
    AgentSpec(name="cy", command="x", peers=["ann"]),
]


class Host:
    """Wakes nobody by itself: records whom the broker would wake, and can play a worker."""

    def __init__(self) -> None:
        self.woken: list[tuple[str, str, str]] = []
        self.running: set[str] = set()
        self.wake = asyncio.Event()

    def changed(self, task: BrokerTask, wake: str | None) -> None:
        if wake is not None:
            self.woken.append((task.id, wake, task.state))
            self.wake.set()

    def runs(self, task_id: str) -> bool:
        return task_id in self.running


@pytest.fixture(params=["sqlite", "postgresql"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Sessions]:
    """Opens the session store (again, after the last one closed): SQLite, or PostgreSQL
    as replicas share it."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    return lambda: open_sessions(SessionsConfig(url=url), paths)


@pytest.fixture
async def store(sessions: Callable[[], Sessions]) -> AsyncIterator[Sessions]:
    opened = sessions()
    yield opened
    await opened.aclose()


def broker(store: Sessions, **config: Any) -> tuple[Broker, Host]:
    host = Host()
    return Broker(store, AGENTS, BrokerConfig(**config), host), host


async def answered_by_worker(b: Broker, host: Host, answer: str) -> None:
    """Plays the host: once the broker wakes a worker, its turn answers `answer`."""
    await asyncio.wait_for(host.wake.wait(), 5)
    task_id = host.woken[-1][0]
    b.shown(await b.started(task_id), "bob")  # prompted with the task
    assert await b.finished(task_id, answer) is None


async def test_a_send_wakes_the_worker_and_its_answer_ends_the_requesters_wait(
    store: Sessions,
) -> None:
    b, host = broker(store)
    ann = b.mint("s1", "ann")
    worker = asyncio.create_task(answered_by_worker(b, host, "Teal."))
    done = await b.call(ann, "send", {"to": "bob", "text": "Your favourite colour?"})
    await worker
    assert done["state"] == "completed" and done["from"] == "ann" and done["to"] == "bob"
    assert [m["text"] for m in done["messages"]] == ["Your favourite colour?", "Teal."]
    assert host.woken[0][1:] == ("bob", "submitted")  # the counterpart, not the sender
    # Stored as the one task store keeps every task: a row of the session's context.
    page = await store.task_page(TaskFilter(OWNER, "s1"), 10)
    assert [r.state for r in page.rows] == ["completed"]


async def test_discover_follows_the_allow_list(store: Sessions) -> None:
    b, _ = broker(store)
    ann, cy = b.mint("s1", "ann"), b.mint("s1", "cy")
    assert [a["name"] for a in (await b.call(ann, "discover", {}))["agents"]] == ["bob", "cy"]
    assert [a["name"] for a in (await b.call(cy, "discover", {}))["agents"]] == ["ann"]
    with pytest.raises(BrokerError) as refused:
        await b.call(cy, "send", {"to": "bob", "text": "hi", "timeout_s": 0})
    assert refused.value.code == "not_allowed"
    with pytest.raises(BrokerError) as unknown:
        await b.call(ann, "send", {"to": "dee", "text": "hi", "timeout_s": 0})
    assert unknown.value.code == "unknown_agent"
    lonely = Broker(
        store, [AGENTS[0], AgentSpec(name="z", command="x", peers=[])], BrokerConfig(), Host()
    )
    with pytest.raises(BrokerError) as nobody:
        await lonely.call(lonely.mint("s1", "z"), "discover", {})
    assert nobody.value.code == "no_peers"
    assert (await store.task_page(TaskFilter(OWNER, "s1"), 10)).total == 0  # nothing sent


async def test_each_refusal_has_its_code_and_changes_nothing(
    store: Sessions, tmp_path: Path
) -> None:
    b, _ = broker(store)
    channel = Channel(b)
    socket = await channel.open()
    ann, bob, other = b.mint("s1", "ann"), b.mint("s1", "bob"), b.mint("s2", "bob")
    try:
        sent = await ask(socket, ann, "send", {"to": "bob", "text": "first", "timeout_s": 0})
        task_id = sent["taskId"]
        before = await store.task_get(task_id, OWNER)

        async def code(token: str, action: str, args: dict[str, Any]) -> str:
            with pytest.raises(BrokerError) as refused:
                await ask(socket, token, action, args)
            return refused.value.code

        assert await code("forged", "get", {"task_id": task_id}) == "unknown_token"
        assert await code("", "discover", {}) == "unknown_token"
        assert await code(other, "get", {"task_id": task_id}) == "cross_context_denied"
        assert await code(ann, "get", {"task_id": "bt_nope"}) == "unknown_task"
        assert await code(ann, "complete", {"task_id": task_id, "text": "mine"}) == (
            "invalid_transition"  # only the worker ends a task
        )
        assert await code(bob, "cancel", {"task_id": task_id}) == "invalid_transition"
        huge = "x" * (MAX_TEXT_CHARS + 1)
        assert await code(ann, "send", {"task_id": task_id, "text": huge}) == "payload_too_large"
        assert await code(ann, "teleport", {}) == "invalid_request"
        assert await store.task_get(task_id, OWNER) == before  # not one write
        await ask(socket, bob, "complete", {"task_id": task_id, "text": "done"})
        assert await code(ann, "send", {"task_id": task_id, "text": "more?"}) == "task_terminal"
        assert await code(ann, "cancel", {"task_id": task_id}) == "task_terminal"
        got = await ask(socket, ann, "get", {"task_id": task_id})
        assert got["state"] == "completed" and got["messages"][-1]["text"] == "done"
    finally:
        await channel.aclose()
    assert not Path(socket).exists()


async def test_the_worker_asks_back_and_the_requesters_follow_up_wakes_it(
    store: Sessions,
) -> None:
    b, _ = broker(store)
    ann, bob = b.mint("s1", "ann"), b.mint("s1", "bob")
    sent = await b.call(ann, "send", {"to": "bob", "text": "paint the door", "timeout_s": 0})
    task_id = sent["taskId"]
    await b.started(task_id)
    asking = asyncio.create_task(
        b.call(bob, "send", {"task_id": task_id, "text": "which colour?", "timeout_s": 5})
    )
    seen = await b.call(ann, "wait", {"task_id": task_id, "timeout_s": 5})
    assert seen["state"] == "input-required" and seen["messages"][-1]["text"] == "which colour?"
    await b.call(ann, "send", {"task_id": task_id, "text": "teal", "timeout_s": 0})
    heard = await asking  # the worker's own send waited for the answer
    assert heard["state"] == "working" and heard["messages"][-1]["text"] == "teal"
    await b.call(bob, "complete", {"task_id": task_id, "text": "painted teal"})
    final = await b.call(ann, "get", {"task_id": task_id})
    assert final["state"] == "completed"


async def test_a_repeated_send_is_the_task_already_sent(store: Sessions) -> None:
    b, _ = broker(store)
    ann = b.mint("s1", "ann")
    one = await b.call(ann, "send", {"to": "bob", "text": "same", "timeout_s": 0})
    two = await b.call(ann, "send", {"to": "bob", "text": "same", "timeout_s": 0})
    three = await b.call(ann, "send", {"to": "bob", "text": "other", "timeout_s": 0})
    assert one["taskId"] == two["taskId"] != three["taskId"]
    none_kept = Broker(store, AGENTS, BrokerConfig(dedup_s=0), Host())
    four = await none_kept.call(
        none_kept.mint("s1", "ann"), "send", {"to": "bob", "text": "same", "timeout_s": 0}
    )
    assert four["taskId"] != one["taskId"]


async def test_the_send_cap_and_the_chain_budget_stop_with_their_errors(
    store: Sessions,
) -> None:
    b, _ = broker(store, max_sends=3, max_depth=2)
    ann, bob = b.mint("s1", "ann"), b.mint("s1", "bob")
    first = await b.call(ann, "send", {"to": "bob", "text": "1", "timeout_s": 0})
    task = await b.started(first["taskId"])
    with b.working_on(task):  # bob, working on ann's task, asks ann: a chain of 2
        second = await b.call(bob, "send", {"to": "ann", "text": "2", "timeout_s": 0})
        inner = await b.started(second["taskId"])
        with b.working_on(inner), pytest.raises(BrokerError) as deep:
            await b.call(ann, "send", {"to": "bob", "text": "3", "timeout_s": 0})
    assert deep.value.code == "chain_budget" and "chain of 3" in str(deep.value)
    await b.call(ann, "send", {"to": "bob", "text": "4", "timeout_s": 0})  # not in a chain
    with pytest.raises(BrokerError) as capped:
        await b.call(ann, "send", {"to": "bob", "text": "5", "timeout_s": 0})
    assert capped.value.code == "send_cap"
    assert (await store.task_page(TaskFilter(OWNER, "s1"), 10)).total == 3


async def test_a_task_outlives_its_broker_and_is_handed_to_its_worker_again(
    sessions: Callable[[], Sessions],
) -> None:
    first = sessions()
    b, _ = broker(first)
    sent = await b.call(b.mint("s1", "ann"), "send", {"to": "bob", "text": "q", "timeout_s": 0})
    await b.started(sent["taskId"])
    await first.aclose()  # the host is gone; its worker never answered

    again = sessions()
    try:
        b2, host = broker(again)
        ann = b2.mint("s1", "ann")
        seen = await b2.call(ann, "get", {"task_id": sent["taskId"]})
        assert seen["state"] == "working" and seen["messages"][0]["text"] == "q"
        assert host.woken == [(sent["taskId"], "bob", "working")]  # woken again
        # The same send, repeated after the restart, is that task, not a second one.
        repeat = await b2.call(ann, "send", {"to": "bob", "text": "q", "timeout_s": 0})
        assert repeat["taskId"] == sent["taskId"]
        b2.shown(await b2.started(sent["taskId"]), "bob")
        await b2.finished(sent["taskId"], "a")
        assert (await b2.call(ann, "get", {"task_id": sent["taskId"]}))["state"] == "completed"
    finally:
        await again.aclose()


async def test_ending_the_context_cancels_its_tasks_and_its_tokens(store: Sessions) -> None:
    b, _ = broker(store)
    ann = b.mint("s1", "ann")
    sent = await b.call(ann, "send", {"to": "bob", "text": "q", "timeout_s": 0})
    await b.end_context("s1")
    found = await store.task_get(sent["taskId"], OWNER)
    assert found is not None and found[0].state == "canceled"
    with pytest.raises(BrokerError) as gone:
        await b.call(ann, "get", {"task_id": sent["taskId"]})
    assert gone.value.code == "unknown_token"


async def test_a_cancelled_turn_cancels_the_tasks_and_the_children_keep_their_tokens(
    store: Sessions,
) -> None:
    b, _ = broker(store)
    ann = b.mint("s1", "ann")
    sent = await b.call(ann, "send", {"to": "bob", "text": "q", "timeout_s": 0})
    await b.cancel_context("s1")
    assert (await b.call(ann, "get", {"task_id": sent["taskId"]}))["state"] == "canceled"
    again = await b.call(ann, "send", {"to": "bob", "text": "next", "timeout_s": 0})
    assert again["state"] == "submitted"


async def test_a_task_whose_history_is_full_still_ends_when_its_worker_answers(
    store: Sessions,
) -> None:
    b, _ = broker(store, max_sends=1000)
    ann, bob = b.mint("s1", "ann"), b.mint("s1", "bob")
    sent = await b.call(ann, "send", {"to": "bob", "text": "0", "timeout_s": 0})
    task_id = sent["taskId"]
    await b.started(task_id)
    for n in range(1, MAX_HISTORY):  # back and forth until the task holds all it may
        who, needs = (bob, "input") if n % 2 else (ann, None)
        await b.call(
            who, "send", {"task_id": task_id, "text": str(n), "needs": needs, "timeout_s": 0}
        )
    with pytest.raises(BrokerError) as full:
        await b.call(ann, "send", {"task_id": task_id, "text": "one more", "timeout_s": 0})
    assert full.value.code == "payload_too_large"
    b.shown(await b.started(task_id), "bob")
    await b.finished(task_id, "done")
    got = await b.call(ann, "get", {"task_id": task_id})
    assert got["state"] == "completed" and len(got["messages"]) == MAX_HISTORY


async def test_a_follow_up_the_worker_never_saw_is_not_answered_by_its_turns_reply(
    store: Sessions,
) -> None:
    b, _ = broker(store)
    ann = b.mint("s1", "ann")
    sent = await b.call(ann, "send", {"to": "bob", "text": "paint it", "timeout_s": 0})
    task = await b.started(sent["taskId"])
    b.shown(task, "bob")  # the host prompts bob with the task
    await b.call(ann, "send", {"task_id": task.id, "text": "blue, please", "timeout_s": 0})
    again = await b.finished(task.id, "painted it red")  # the turn's reply, unaware
    assert again is not None and [m.text for m in b.unseen(again, "bob")] == ["blue, please"]
    assert (await b.call(ann, "get", {"task_id": task.id}))["state"] == "working"
    b.shown(again, "bob")  # prompted with the follow-up
    assert await b.finished(task.id, "painted it blue") is None
    done = await b.call(ann, "get", {"task_id": task.id})
    assert done["state"] == "completed" and done["messages"][-1]["text"] == "painted it blue"

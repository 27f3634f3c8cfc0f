"""Replicas behind a load balancer continue each other's conversations: two `raven gateway`
processes (A2A mounted) on one PostgreSQL database behind HAProxy, driven through the
balancer by an A2A peer and by UIs, with one replica killed mid-turn."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from raven.engine.replicas import LAPSED_TURN
from tests.e2e.a2a_server import message as a2a_message
from tests.e2e.topology import (
    DEADLINE_S,
    GATEWAY_TOKEN,
    LEASE_S,
    Topology,
    topology,
)
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream

IMMEDIATELY = {"configuration": {"returnImmediately": True}}


def said_to_model(server: FakeModelServer, index: int) -> list[tuple[str, str]]:
    """(role, text) of the messages the model was sent in its `index`-th request."""
    out = []
    for m in server.requests[index].body["messages"]:
        content = m.get("content") or ""
        text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
        out.append((m["role"], text.strip()))
    return out


async def state_reaches(top: Topology, task_id: str, state: str) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        task, _ = await asyncio.to_thread(top.call, "GetTask", {"id": task_id})
        if task["status"]["state"] == state or time.monotonic() > deadline:
            assert task["status"]["state"] == state, task["status"]
            return task
        await asyncio.sleep(0.1)


async def test_a_conversation_a_question_and_a_killed_replica_through_the_balancer(
    env: dict[str, str], tmp_path: Path, pg_url: str, model_server: FakeModelServer
) -> None:
    model_server.queue(
        Reply(events=openai_stream(text="Noted: the tag is v1.2.")),
        Reply(events=openai_stream(text="You told me v1.2.")),
        Reply(events=openai_stream(tool_calls=[("q1", "ask_user", '{"question": "Branch?"}')])),
        Reply(events=openai_stream(text="Deploying main.")),
        Reply(events=openai_stream(text="Built it."), held_until=(built := threading.Event())),
        Reply(events=openai_stream(text="Tested it.")),
        Reply(events=openai_stream(text="never said"), delay_s=60),
    )
    with topology(env, tmp_path, pg_url, model_server.url + "/v1") as top:
        # A conversation started on one replica continues on the other, with its history.
        first, by = top.call("SendMessage", a2a_message("Remember the tag v1.2."))
        context = first["task"]["contextId"]
        second, then_by = top.call("SendMessage", a2a_message("Which tag?", contextId=context))
        assert {by, then_by} == {"r1", "r2"}  # round robin: one each
        assert (
            second["task"]["status"]["message"]["parts"][0]["text"].strip() == "You told me v1.2."
        )
        assert said_to_model(model_server, 1)[-3:] == [
            ("user", "Remember the tag v1.2."),
            ("assistant", "Noted: the tag is v1.2."),
            ("user", "Which tag?"),
        ]

        # A question parked on one replica is answered through the other, in the same turn.
        asked, parked_on = top.call("SendMessage", a2a_message("Deploy.", contextId=context))
        task = asked["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        answered, answered_by = top.call(
            "SendMessage", a2a_message("main", taskId=task["id"], contextId=context)
        )
        assert answered_by != parked_on
        assert answered["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert "answered by a person" not in json.dumps(answered)  # the peer did
        assert (
            answered["task"]["status"]["message"]["parts"][0]["text"].strip() == "Deploying main."
        )
        tool_result = said_to_model(model_server, 3)[-1]
        assert tool_result == ("tool", "main")
        users = [text for role, text in said_to_model(model_server, 3) if role == "user"]
        assert users[-1] == "Deploy."  # the answer was no new turn

        # A task of the conversation sent to the other replica while a turn runs waits
        # for that turn (submitted: its turn is the session's, which is taken), then
        # answers for itself alone.
        build, builder = top.call(
            "SendMessage", a2a_message("Build.", contextId=context) | IMMEDIATELY
        )
        await state_reaches(top, build["task"]["id"], "TASK_STATE_WORKING")
        await until_requests(model_server, 5)
        other = top.other(builder).name
        test, tester = top.call(
            "SendMessage", a2a_message("Test.", contextId=context) | IMMEDIATELY, other
        )
        assert tester == other
        waiting, _ = top.call("GetTask", {"id": test["task"]["id"]}, other)
        assert waiting["status"]["state"] == "TASK_STATE_SUBMITTED"
        built.set()
        done = await state_reaches(top, build["task"]["id"], "TASK_STATE_COMPLETED")
        assert done["status"]["message"]["parts"][0]["text"].strip() == "Built it."
        tested = await state_reaches(top, test["task"]["id"], "TASK_STATE_COMPLETED")
        assert tested["status"]["message"]["parts"][0]["text"].strip() == "Tested it."
        (response,) = [a for a in tested["artifacts"] if a["name"] == "response"]
        assert "".join(p["text"] for p in response["parts"]).strip() == "Tested it."
        assert said_to_model(model_server, 5)[-3:] == [
            ("user", "Build."),
            ("assistant", "Built it."),
            ("user", "Test."),
        ]

        # The replica running a turn is killed: the task ends failed, and so does the one
        # that waited there for its turn; the session's turn ends with them, and the
        # conversation goes on on the other replica.
        slow, runner = top.call(
            "SendMessage", a2a_message("Slow.", contextId=context) | IMMEDIATELY
        )
        await state_reaches(top, slow["task"]["id"], "TASK_STATE_WORKING")
        await until_requests(model_server, 7)
        queued, _ = top.call(
            "SendMessage", a2a_message("Then this.", contextId=context) | IMMEDIATELY, runner
        )
        assert queued["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        top.replica(runner).kill()
        killed_at = time.monotonic()
        for task in (slow, queued):
            failed = await state_reaches(top, task["task"]["id"], "TASK_STATE_FAILED")
            assert "stopped" in failed["status"]["message"]["parts"][0]["text"]
        session = await session_of(top, top.other(runner).name)
        while session["failure"] != LAPSED_TURN and time.monotonic() - killed_at < DEADLINE_S:
            await asyncio.sleep(0.1)
            session = await session_of(top, top.other(runner).name)
        # Both ended within the bound the docs give: a lease and a third of it (and slack
        # for a loaded machine).
        assert time.monotonic() - killed_at < LEASE_S * 4 / 3 + 5
        assert session["failure"] == LAPSED_TURN and not session["busy"]
        model_server.queue(Reply(events=openai_stream(text="Back on v1.2.")))
        back, _ = top.call("SendMessage", a2a_message("Still there?", contextId=context))
        assert back["task"]["status"]["message"]["parts"][0]["text"].strip() == "Back on v1.2."


async def until_requests(server: FakeModelServer, count: int) -> None:
    async with asyncio.timeout(DEADLINE_S):
        while len(server.requests) < count:
            await asyncio.sleep(0.02)


class Ui:
    """A UI on one replica, reached through the balancer: a Raven RPC WebSocket."""

    def __init__(self, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._http, self._ws = http, ws
        self._ids = itertools.count(1)
        self.frames: list[dict[str, Any]] = []

    @classmethod
    async def on(cls, top: Topology, replica: str) -> Ui:
        http = aiohttp.ClientSession()
        ws = await http.ws_connect(
            top.ws_url(replica), headers={"Authorization": f"Bearer {GATEWAY_TOKEN}"}
        )
        return cls(http, ws)

    async def call(self, method: str, **params: Any) -> Any:
        n = next(self._ids)
        await self._ws.send_json({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
        reply = await self.frame(lambda f: f.get("id") == n)
        assert "result" in reply, reply
        return reply["result"]

    async def frame(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        async with asyncio.timeout(DEADLINE_S):
            while not (found := [f for f in self.frames if wanted(f)]):
                message = await self._ws.receive()
                assert message.type == aiohttp.WSMsgType.TEXT, message
                self.frames.append(json.loads(message.data))
        return found[0]

    def events(self, session_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(cursor, event) of the session's events this UI was sent, in order."""
        return [
            (f["params"]["cursor"], f["params"]["event"])
            for f in self.frames
            if f.get("method") == "session.event" and f["params"]["sessionId"] == session_id
        ]

    def kinds(self, session_id: str, turn: int) -> list[str]:
        """The types of the events of the session's `turn`-th turn this UI heard so far."""
        turns: list[list[str]] = []
        for _, event in self.events(session_id):
            if event["type"] == "TurnStarted":
                turns.append([])
            if turns:
                turns[-1].append(event["type"])
        return turns[turn - 1] if len(turns) >= turn else []

    async def ended(self, session_id: str, count: int = 1) -> dict[str, Any]:
        """The `count`-th TurnEnded of the session this UI heard."""

        def enough(_: dict[str, Any]) -> bool:
            return len([e for _, e in self.events(session_id) if e["type"] == "TurnEnded"]) >= count

        await self.frame(enough)
        return [e for _, e in self.events(session_id) if e["type"] == "TurnEnded"][count - 1]

    async def close(self) -> None:
        await self._ws.close()
        await self._http.close()


async def session_of(top: Topology, replica: str) -> dict[str, Any]:
    """The one A2A conversation's session, as `session.list` on `replica` shows it."""
    ui = await Ui.on(top, replica)
    try:
        page = await ui.call("session.list")
        (session,) = [s for s in page["sessions"] if s["sessionId"].startswith("a2a_")]
        return session  # type: ignore[no-any-return]
    finally:
        await ui.close()


async def test_uis_on_two_replicas_follow_steer_and_outlive_the_replica_running_the_turn(
    env: dict[str, str], tmp_path: Path, pg_url: str, model_server: FakeModelServer
) -> None:
    slow_words = "one two three four five six seven eight nine ten"
    write = ("w1", "write_file", '{"path": "notes.txt", "content": "from r1"}')
    model_server.queue(
        Reply(events=openai_stream(text=slow_words), event_delay_s=0.05),
        Reply(events=openai_stream(text="and the tests too")),
        Reply(events=openai_stream(tool_calls=[write])),
        Reply(events=openai_stream(text="written")),
        Reply(events=openai_stream(text="a long one " * 40), event_delay_s=0.2),
    )
    with topology(env, tmp_path, pg_url, model_server.url + "/v1") as top:
        near, far = await Ui.on(top, "r1"), await Ui.on(top, "r2")
        uis = [near, far]
        try:
            created = await near.call("session.create", cwd=str(top.workdir))
            sid = created["sessionId"]
            await far.call("session.subscribe", sessionId=sid)
            # The turn runs on r1; the UI on r2 follows it, event for event.
            await near.call("turn.send", sessionId=sid, text="count to ten")
            await far.frame(lambda _: "AgentText" in far.kinds(sid, turn=1))
            assert (await far.call("session.get", sessionId=sid))["session"]["busy"]
            steered = await far.call("turn.steer", sessionId=sid, text="check the tests too")
            assert steered["steered"]  # through r2, to the turn on r1
            first_end = await far.ended(sid)
            await near.ended(sid)
            assert first_end["stopReason"] == "end_turn"
            assert far.events(sid) == near.events(sid)
            assert ("user", "check the tests too") in said_to_model(model_server, 1)

            # A turn on r1 asks for approval: the UI on r2 is asked too, and its answer
            # reaches the turn; both UIs hear it settled.
            await near.call("turn.send", sessionId=sid, text="write the notes")
            asked = await far.frame(lambda f: f.get("method") == "permission.requested")
            request = asked["params"]
            assert request["sessionId"] == sid and request["title"].startswith("Write")
            await near.frame(
                lambda f: (
                    f.get("method") == "permission.requested"
                    and f["params"]["requestId"] == request["requestId"]
                )
            )
            await far.call(
                "permission.respond", requestId=request["requestId"], decision="allow_once"
            )
            assert (await near.ended(sid, 2))["stopReason"] == "end_turn"
            assert (top.workdir / "notes.txt").read_text() == "from r1"
            for ui in (near, far):
                await ui.frame(
                    lambda f: (
                        f.get("method") == "request.settled"
                        and f["params"]["requestId"] == request["requestId"]
                    )
                )
            assert (await far.call("session.get", sessionId=sid))["pending"] == []

            # A UI that lost r1 mid-turn comes back on r2 from its last cursor: no gap,
            # no duplicate.
            await near.call("turn.send", sessionId=sid, text="say a long one")
            await near.frame(lambda _: "AgentText" in near.kinds(sid, turn=3))
            last_cursor = near.events(sid)[-1][0]
            heard_before = near.events(sid)
            await near.close()
            uis.remove(near)
            back = await Ui.on(top, "r2")
            uis.append(back)
            await back.call("session.subscribe", sessionId=sid, after=last_cursor)

            # r1, running that turn, is killed: the UIs on r2 hear the turn end failed.
            top.replica("r1").kill()
            end = await back.ended(sid)
            assert end["error"] == LAPSED_TURN
            assert (await far.ended(sid, 3))["error"] == LAPSED_TURN
            resumed = heard_before + back.events(sid)
            assert resumed == far.events(sid)  # every event once, in order
            detail = await far.call("session.get", sessionId=sid)
            assert detail["session"]["failure"] == LAPSED_TURN
            assert not detail["session"]["busy"]
            model_server.queue(Reply(events=openai_stream(text="back")))
            await far.call("turn.send", sessionId=sid, text="are you there?")
            assert (await far.ended(sid, 4))["stopReason"] == "end_turn"
        finally:
            for ui in uis:
                await ui.close()


def test_the_command_line_keeps_its_sessions_in_postgresql(
    env: dict[str, str], home: Path, tmp_path: Path, pg_url: str
) -> None:
    """`raven run`, `raven sessions` on a PostgreSQL store: a conversation continued from
    another process (with another home) that shares the database, found by its words."""
    from tests.conftest import raven, write_config

    homes = [home, tmp_path / "other-home"]
    homes[1].mkdir()
    for each in homes:
        write_config(each, {"defaultModel": "echo", "sessions": {"url": pg_url}})
    first = raven("run", "remember the marigolds", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (session,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    other = {**env, "RAVEN_HOME": str(homes[1])}
    again = raven("run", "-s", session["id"][:10], "and the petunias", env=other, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "and the petunias"
    found = json.loads(raven("sessions", "search", "marigolds", "--json", env=other).stdout)
    assert [hit["id"] for hit in found] == [session["id"]]
    shown = raven("sessions", "show", session["id"], env=env)
    assert "remember the marigolds" in shown.stdout and "and the petunias" in shown.stdout
    assert not (home / "data" / "raven.db").exists()  # nothing was kept beside it

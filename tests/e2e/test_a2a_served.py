"""Configured agents served over A2A in Raven's place (`raven a2a serve --agent NAME`),
launched as an operator launches them and asked with the a2a-sdk's own client."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver
from a2a.helpers import get_message_text
from a2a.types import SendMessageRequest, TaskState

from tests.conftest import RAVEN, raven, write_config
from tests.e2e.a2a_server import A2AServer, configure, message, start
from tests.e2e.test_a2a import last, sdk_client, user
from tests.e2e.test_a2a_stdio import Peer
from tests.e2e.test_a2a_stdio import message as stdio_message
from tests.processes import alive, ended, live_pids, pid_from

SDK_AGENT = Path(__file__).parents[1] / "acp_client" / "sdk_agent.py"


def agents(tmp_path: Path) -> list[dict[str, Any]]:
    return [
        {
            "name": "tester",
            "description": "Runs the project's tests",
            "command": sys.executable,
            "args": [str(SDK_AGENT), "served"],
            "permissions": "ask",
        },
        {"name": "upper", "protocol": "cli", "command": "tr", "args": ["a-z", "A-Z"]},
        {
            "name": "sleeper",
            "command": sys.executable,
            "args": [str(SDK_AGENT), "hang"],
            "env": {"HANG_PIDFILE": str(tmp_path / "hang.pid")},
        },
    ]


async def test_a_served_agent_answers_asks_through_input_required_and_stays_warm(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home, agents=agents(tmp_path))
    server = start(env, "--agent", "tester", "--agent", "upper")
    client, http = await sdk_client(server)
    try:
        # The card at the well-known path is the first agent's, as it and the config say.
        card = await A2ACardResolver(http, server.base).get_agent_card()
        assert card.name == "tester" and card.description == "Runs the project's tests"
        assert card.version == "9.9"  # what the child said of itself when Raven started it
        assert [s.id for s in card.skills] == ["tester"]
        assert card.supported_interfaces[0].url == f"{server.base}/a2a/agents/tester"
        catalog = httpx.get(f"{server.base}/.well-known/ai-catalog.json").json()
        assert catalog["specVersion"] == "1.0"
        assert [(e["identifier"], e["type"], e["url"]) for e in catalog["entries"]] == [
            (
                f"urn:raven:a2a:{name}",
                "application/a2a-agent-card+json",
                f"{server.base}/a2a/agents/{name}/.well-known/agent-card.json",
            )
            for name in ("tester", "upper")
        ]
        # Raven's own agent is not served: only the agents asked for.
        assert httpx.post(f"{server.base}/a2a", json={}).status_code == 404

        # The child asks to run a command; its rules escalate: the peer is asked.
        (event,) = await last(client.send_message(SendMessageRequest(message=user("test it"))))
        task = event.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
        asked = get_message_text(task.status.message)
        assert asked.startswith("Allow tester: Run make test?") and "make test" in asked
        allowed = user("yes", task_id=task.id, context_id=task.context_id)
        (answer,) = await last(client.send_message(SendMessageRequest(message=allowed)))
        done = answer.task
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
        said = "I will run the tests. Outcome opt-allow_once. Asked so far: test it"
        assert get_message_text(done.status.message) == said
        history = server.call("GetTask", {"id": task.id, "historyLength": 50})["result"]
        progress = [
            m["parts"][0]["text"]
            for m in history["history"]
            if m["role"] == "ROLE_AGENT" and m.get("metadata", {}).get("raven", {}).get("progress")
        ]
        assert "→ Run make test" in progress and "✓ Run make test" in progress
        assert any(line.startswith("Plan:\n[~] run make test") for line in progress)
        usage = done.status.message.metadata["raven"]["usage"]
        assert (usage["inputTokens"], usage["outputTokens"]) == (120, 30)

        # The same context is one conversation with the same warm child.
        (again,) = await last(
            client.send_message(
                SendMessageRequest(message=user("and lint", context_id=task.context_id))
            )
        )
        assert again.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        (no,) = await last(
            client.send_message(
                SendMessageRequest(
                    message=user("no", task_id=again.task.id, context_id=task.context_id)
                )
            )
        )
        said = get_message_text(no.task.status.message)
        assert said.endswith("Outcome opt-reject_once. Asked so far: test it | and lint"), said

        # The other agent, at its own path: a one-shot command, its own tasks.
        upper, upper_http = await sdk_client(
            server.__class__(server.proc, f"{server.base}/a2a/agents/upper", "", server.token)
        )
        try:
            (shout,) = await last(upper.send_message(SendMessageRequest(message=user("quiet"))))
            assert get_message_text(shout.task.status.message).strip() == "QUIET"
            listed = server.call("ListTasks", {})["result"]["tasks"]
            assert shout.task.id not in [t["id"] for t in listed]  # each agent's tasks its own
        finally:
            await upper.close()
            await upper_http.aclose()
    finally:
        await client.close()
        await http.aclose()
        assert server.stop() == 0


async def test_a_cancel_reaches_the_served_child_which_stays_for_the_next_task(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home, agents=agents(tmp_path))
    server = start(env, "--agent", "sleeper")
    pidfile = tmp_path / "hang.pid"
    try:
        at_once = {"configuration": {"returnImmediately": True}}
        first = server.call("SendMessage", message("wait") | at_once)["result"]["task"]
        pid = await pid_from(pidfile)
        cancelled = server.call("CancelTask", {"id": first["id"]})["result"]
        assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
        # The child heard the cancel and ended its prompt: the next task of the
        # conversation reaches the same process at once.
        pidfile.unlink()
        again = message("wait again", contextId=first["contextId"])
        second = server.call("SendMessage", again | at_once)["result"]["task"]
        assert await pid_from(pidfile) == pid and alive(pid)
        assert server.call("CancelTask", {"id": second["id"]})["result"]["status"]["state"] == (
            "TASK_STATE_CANCELED"
        )
    finally:
        assert server.stop() == 0
    assert await ended([pid], 5)  # stopped with the server: nothing left running


async def test_conversations_beyond_the_warm_children_resume_their_child_session(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    allowed = {**agents(tmp_path)[0], "name": "keeper", "permissions": "auto"}
    configure(home, agents=[allowed], maxConcurrentTasks=1)  # one child kept running
    server = start(env, "--agent", "keeper")

    def ask(text: str, **ids: str) -> str:
        task = server.call("SendMessage", message(text, **ids))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        return str(task["status"]["message"]["parts"][0]["text"])

    workdir = home / "data" / "a2a-work"

    def children() -> list[int]:
        """The agent's processes, which work in the A2A working directory."""
        return live_pids(lambda proc, _: (proc / "cwd").resolve() == workdir)

    try:
        first = server.call("SendMessage", message("first"))["result"]["task"]
        assert first["status"]["message"]["parts"][0]["text"].endswith("Asked so far: first")
        assert ask("other").endswith("Asked so far: other")
        assert len(children()) == 1  # the first conversation's child made room
        # Its next task starts a child again, which resumes the conversation's session.
        resumed = ask("second", contextId=first["contextId"])
        assert resumed.endswith("Asked so far: first | second"), resumed
        assert len(children()) == 1
    finally:
        assert server.stop() == 0
    assert not children()


async def test_raven_serves_the_configured_agents_beside_itself(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home, [{"text": "Raven here."}], agents=agents(tmp_path), agents_served=["upper"])
    server = start(env)
    try:
        card = httpx.get(f"{server.base}/.well-known/agent-card.json").json()
        assert card["name"] == "Raven"
        catalog = httpx.get(f"{server.base}/.well-known/ai-catalog.json").json()
        assert [e["url"] for e in catalog["entries"]] == [
            f"{server.base}/.well-known/agent-card.json",
            f"{server.base}/a2a/agents/upper/.well-known/agent-card.json",
        ]
        own = server.call("SendMessage", message("hi"))["result"]["task"]
        assert own["status"]["message"]["parts"][0]["text"] == "Raven here."
        upper = A2AServer(server.proc, "", f"{server.base}/a2a/agents/upper", server.token)
        task = upper.call("SendMessage", message("loud"))["result"]["task"]
        assert task["status"]["message"]["parts"][0]["text"].strip() == "LOUD"
        # A task is found only at the agent that has it.
        assert upper.call("GetTask", {"id": own["id"]})["error"]["code"] == -32001
        status = raven("a2a", "status", env=env).stdout
        assert "agents:     upper at /a2a/agents/upper (beside Raven)" in status
    finally:
        assert server.stop() == 0


async def test_a_configured_agent_served_over_stdio_answers_on_its_pipes(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    write_config(home, {"agents": agents(tmp_path)})  # no model: the agent answers
    proc = await asyncio.create_subprocess_exec(
        *RAVEN, "a2a", "stdio", "--agent", "upper", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    peer = Peer(proc)
    card = (await peer.call(1, "GetExtendedAgentCard", {}))["result"]
    assert card["name"] == "upper" and card["skills"][0]["id"] == "upper"
    done = (await peer.call(2, "SendMessage", stdio_message("whisper")))["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["status"]["message"]["parts"][0]["text"].strip() == "WHISPER"
    assert proc.stdin is not None
    proc.stdin.close()  # the parent is done: Raven exits
    assert await peer.ended() == 0


async def test_an_agent_that_will_not_start_is_served_by_its_config_and_fails_its_tasks(
    env: dict[str, str], home: Path
) -> None:
    ghost = {"name": "ghost", "description": "Not installed", "command": "no-such-agent"}
    configure(home, agents=[ghost])
    server = start(env, "--agent", "ghost")
    try:
        card = httpx.get(f"{server.base}/.well-known/agent-card.json").json()
        assert (card["name"], card["description"]) == ("ghost", "Not installed")
        task = server.call("SendMessage", message("hello"))["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        # The peer learns it failed; the operator's log says why.
        assert "no-such-agent" not in json.dumps(task)
    finally:
        assert server.stop() == 0
    logged = "".join(f.read_text() for f in (home / "logs").iterdir())
    assert "served agent ghost did not start to describe itself" in logged
    assert "cannot start 'no-such-agent'" in logged

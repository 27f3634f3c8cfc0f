"""The real codex-acp (pinned, from npm) driven by Raven offline: its model API is a loopback
fake of OpenAI's Responses API, its home a fresh folder, and Raven launched as a user does."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RAVEN, raven, write_config
from tests.e2e.a2a_server import configure, start
from tests.e2e.terminal import Terminal
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream, responses_stream
from tests.npm import npm_install
from tests.processes import alive, live_pids

CODEX_ACP = "@agentclientprotocol/codex-acp@2.6.0"
A2A_JS = "@a2a-js/sdk@1.3.0"
JS_CLIENT = Path(__file__).parent / "a2a_js_client.mjs"
COMMAND = "echo hi > codex_note.txt"
SIGN_IN_SERVER = Path(__file__).parents[1] / "mcp" / "servers" / "sign_in_server.py"


@pytest.fixture(scope="module")
def codex_acp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return npm_install(tmp_path_factory, CODEX_ACP) / "node_modules" / ".bin" / "codex-acp"


def codex_agent(codex_acp: Path, home: Path, model: FakeModelServer, permissions: str) -> Any:
    """An agents entry for codex-acp with its own CODEX_HOME, talking to `model` only.

    Codex asks before every command that is not a known read (`untrusted`) and runs what
    it is allowed without its sandbox (which needs bubblewrap); it never retries a request.
    """
    home.mkdir()
    (home / "config.toml").write_text(
        f"""model = "gpt-6-luna"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "{model.url}/v1"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
"""
    )
    env = {"CODEX_HOME": str(home), "FAKE_OPENAI_KEY": "sk-fake-codex"}
    return {"name": "codex", "command": str(codex_acp), "env": env, "permissions": permissions}


def after_the_command(body: dict[str, Any]) -> Reply:
    """Codex's second request carries what its tool said; the model's answer quotes it."""
    (output,) = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    said = "ran it" if "exited with code 0" in output else "was refused"
    return Reply(events=responses_stream(text=f"The command {said}."))


def queue_the_note(model: FakeModelServer) -> None:
    """The model asks to run the command outside codex's read-only sandbox, as a model does
    when its session may not write: codex asks its client first."""
    args = {"cmd": COMMAND, "sandbox_permissions": "require_escalated", "justification": "note"}
    call = ("call_1", "exec_command", json.dumps(args))
    model.queue(Reply(events=responses_stream(function_call=call)), after_the_command)


@pytest.mark.parametrize(
    ("permissions", "decision", "remembered"),
    [("auto", "allow always", True), ("auto-once", "allow once", False)],
)
def test_agents_run_drives_codex_allowing_its_command(
    codex_acp: Path,
    model_server: FakeModelServer,
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    permissions: str,
    decision: str,
    remembered: bool,
) -> None:
    codex_home, work = tmp_path / "codex-home", tmp_path / "work"
    work.mkdir()
    agent = codex_agent(codex_acp, codex_home, model_server, permissions)
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    queue_the_note(model_server)
    ran = raven("agents", "run", "codex", "write the note", "--json", env=env, cwd=work)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout)
    assert out["answer"] == "The command ran it." and out["stopReason"] == "end_turn"
    assert out["decisions"] == [f"{decision}: {COMMAND} (by {permissions})"]
    assert (work / "codex_note.txt").read_text() == "hi\n"
    keys = [r.headers["Authorization"] for r in model_server.requests]
    # The key in the entry's env reached codex. Codex 2.6 may make a request of its own once
    # the turn is over (its background work, when it lives long enough): the same key.
    assert keys[:2] == ["Bearer sk-fake-codex"] * 2 and set(keys) == {"Bearer sk-fake-codex"}
    # allow_always outlives the task inside codex (a rule in its home); allow_once does not
    rules = codex_home / "rules" / "default.rules"
    assert (rules.exists() and COMMAND in rules.read_text()) is remembered


def test_read_only_refuses_codex_its_command_and_codex_stops(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    agent = codex_agent(codex_acp, tmp_path / "codex-home", model_server, "read-only")
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    queue_the_note(model_server)
    ran = raven("agents", "run", "codex", "write the note", "--json", env=env, cwd=work)
    assert ran.returncode == 3, ran.stdout + ran.stderr  # stopped short of an answer
    out = json.loads(ran.stdout)
    assert out["stopReason"] == "cancelled"  # codex ends its turn on a refusal
    (decision,) = out["decisions"]
    assert decision.startswith(f"reject once: {COMMAND} (by read-only")
    assert not (work / "codex_note.txt").exists()


def test_an_escalate_rule_sees_codexs_command_under_auto(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """Nobody answers `raven agents run` here (no terminal): the escalated command is
    refused, and codex stops."""
    work = tmp_path / "work"
    work.mkdir()
    agent = codex_agent(codex_acp, tmp_path / "codex-home", model_server, "auto")
    agent["rules"] = [{"kind": ["execute"], "action": "escalate"}]
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    queue_the_note(model_server)
    ran = raven("agents", "run", "codex", "write the note", "--json", env=env, cwd=work)
    out = json.loads(ran.stdout)
    assert out["decisions"] == [f"reject once: {COMMAND} (no answer: rejected)"]
    assert not (work / "codex_note.txt").exists()


def test_delegate_in_a_turn_hands_the_task_to_codex(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    codex_home, work = tmp_path / "codex-home", tmp_path / "work"
    work.mkdir()
    delegate = {"name": "delegate", "arguments": {"agent": "codex", "task": "write the note"}}
    (home / "script.json").write_text(
        json.dumps([{"toolCalls": [delegate]}, {"text": "Codex wrote the note."}])
    )
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "defaultModel": "s",
            "agents": [codex_agent(codex_acp, codex_home, model_server, "auto-once")],
        },
    )
    queue_the_note(model_server)
    ran = raven("run", "--yes", "delegate the note", env=env, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith("Codex wrote the note.")
    assert f"codex: → {COMMAND}" in ran.stderr
    assert (work / "codex_note.txt").read_text() == "hi\n"
    (task,) = [i for i in model_server.requests[0].body["input"] if i.get("role") == "user"][-1:]
    assert "write the note" in json.dumps(task)


def codex_processes(codex_home: Path) -> list[int]:
    """Pids of the processes started with this CODEX_HOME (codex-acp and its node launcher)."""
    mark = f"CODEX_HOME={codex_home}".encode()
    return live_pids(lambda proc, _: mark in (proc / "environ").read_bytes().split(b"\0"))


async def test_ctrl_c_cancels_codex_and_leaves_nothing_running(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    codex_home = tmp_path / "codex-home"
    agent = codex_agent(codex_acp, codex_home, model_server, "auto")
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    model_server.queue(Reply(events=responses_stream(text="too late"), delay_s=120))
    proc = await asyncio.create_subprocess_exec(
        *RAVEN, "agents", "run", "codex", "think hard", env=env, cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):  # codex is waiting on its model
        while not model_server.requests:
            await asyncio.sleep(0.05)
    children = codex_processes(codex_home)
    assert children
    proc.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(proc.wait(), 15) == 130
    assert proc.stderr is not None
    assert "cancelled" in (await proc.stderr.read()).decode()
    logged = "".join(f.read_text() for f in (home / "logs").iterdir())
    assert "sub-agent codex: cancelled; it answered cancelled" in logged
    assert not [pid for pid in children if alive(pid)]


def with_sign_in(codex_home: Path, told: Path) -> None:
    """An MCP server in codex's own config, as a user adds one, whose tool asks for a
    sign-in (a URL consent) and writes down what it was told in `told`. `required`: codex
    starts the session once the server is up (it lists a server's tools in the background
    otherwise, and a turn begun sooner has no such tool)."""
    args = json.dumps([str(SIGN_IN_SERVER), str(told)])
    with open(codex_home / "config.toml", "a", encoding="utf-8") as config:
        config.write(
            f"\n[mcp_servers.notes]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
            "required = true\n"
        )


def queue_the_sign_in(model: FakeModelServer) -> None:
    """The model calls the MCP tool as codex's models do, from its JavaScript `exec` cell,
    then says what the tool returned."""

    def after(body: dict[str, Any]) -> Reply:
        (output,) = [i["output"] for i in body["input"] if i["type"] == "custom_tool_call_output"]
        told = re.search(r"told: (\w+)", json.dumps(output))
        said = told.group(1) if told else "nothing"
        return Reply(events=responses_stream(text=f"Notes was told {said}."))

    connect = "text(await tools.mcp__notes__connect({}));"
    model.queue(Reply(events=responses_stream(custom_call=("call_1", "exec", connect))), after)


@pytest.mark.parametrize(
    ("permissions", "rules", "tool_call"),
    [
        ("auto", [], "allow always: mcp.notes.connect (by auto)"),
        ("auto-once", [], "allow once: mcp.notes.connect (by auto-once)"),
        ("read-only", [{"action": "allow"}], "allow once: mcp.notes.connect (by rule 1)"),
    ],
)
def test_a_sign_in_codex_relays_is_declined_when_nobody_is_asked(
    codex_acp: Path,
    model_server: FakeModelServer,
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    permissions: str,
    rules: list[dict[str, Any]],
    tool_call: str,
) -> None:
    """Codex relays its MCP server's URL consent to Raven; no preset and no rule gives it."""
    codex_home, told = tmp_path / "codex-home", tmp_path / "told.txt"
    agent = {**codex_agent(codex_acp, codex_home, model_server, permissions), "rules": rules}
    with_sign_in(codex_home, told)
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    queue_the_sign_in(model_server)
    ran = raven("agents", "run", "codex", "connect my notes", "--json", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout)
    assert out["answer"] == "Notes was told decline."
    assert out["decisions"] == [tool_call, "consent declined: codex: Sign in to Notes (no answer)"]
    assert told.read_text() == "decline\n"


def test_a_sign_in_codex_relays_is_given_by_the_person_shown_the_page(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    codex_home, told = tmp_path / "codex-home", tmp_path / "told.txt"
    agent = codex_agent(codex_acp, codex_home, model_server, "auto")
    with_sign_in(codex_home, told)
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    queue_the_sign_in(model_server)
    term = Terminal([*RAVEN, "agents", "run", "codex", "connect my notes"], env, tmp_path)
    try:
        term.expect("Sign in to Notes", timeout=60)
        term.expect("open https://notes.example/oauth/authorize?client_id=raven-test")
        term.type("y\n")
        term.expect("Notes was told accept.", timeout=60)
        term.expect("decision: consent accepted: codex: Sign in to Notes (by you)")
        assert term.proc.wait(30) == 0
    finally:
        term.close()
    assert told.read_text() == "accept\n"


def test_a_task_given_while_codex_works_runs_beside_it_in_a_fork_of_its_session(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """The parent's model hands codex a task, then two at once: codex serves session/fork,
    so the second runs beside the first in a fork, knowing what codex was told before."""
    codex_home, work = tmp_path / "codex-home", tmp_path / "work"
    work.mkdir()

    def delegate(task: str) -> dict[str, Any]:
        return {"name": "delegate", "arguments": {"agent": "codex", "task": task}}

    steps = [
        {"toolCalls": [delegate("remember the word heron")]},
        {"toolCalls": [delegate("first task"), delegate("second task")]},
        {"text": "Both done."},
    ]
    (home / "script.json").write_text(json.dumps(steps))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "defaultModel": "s",
            "agents": [codex_agent(codex_acp, codex_home, model_server, "auto")],
        },
    )
    second_asks = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        task = last_said(body)
        if task == "second task":
            second_asks.set()
        held = second_asks if task == "first task" else None  # beside it, or never
        return Reply(events=responses_stream(text=f"did {task}"), held_until=held)

    model_server.queue(*[answer] * 8)  # the tasks, and titles codex asks for on its own
    ran = raven("run", "--yes", "go", env=env, cwd=work)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith("Both done.")
    logged = "".join(f.read_text() for f in (home / "logs").iterdir())
    assert logged.count("sub-agent codex: forked its session for a task beside it") == 1
    (second,) = [r.body for r in model_server.requests if last_said(r.body) == "second task"]
    assert "remember the word heron" in json.dumps(second)  # the fork knew what codex was told


def last_said(body: dict[str, Any]) -> str:
    """The text of the last user message of a Responses API request."""
    said = [i for i in body["input"] if i.get("role") == "user"]
    return str(said[-1]["content"][0]["text"])


def test_codexs_own_sub_agent_asking_after_codex_answered_is_answered_and_waited_for(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """Codex spawns a sub-agent of its own and ends its turn; the sub-agent asks to run a
    command after that (its model's answer is held until codex's last request): Raven
    answers it under the same rules and keeps codex until the sub-agent is idle."""
    work = tmp_path / "work"
    work.mkdir()
    agent = codex_agent(codex_acp, tmp_path / "codex-home", model_server, "auto")
    write_config(home, {"defaultModel": "echo", "agents": [agent]})
    command = "echo late > late.txt"
    codex_ends = threading.Event()

    def reply(body: dict[str, Any]) -> Reply:
        outputs = {i["call_id"] for i in body["input"] if i["type"] == "function_call_output"}
        writer = any(i["type"] == "agent_message" and "/root/writer" in json.dumps(i)
                     for i in body["input"])  # fmt: skip
        if "call_w" in outputs:
            return Reply(events=responses_stream(text="The writer wrote it."))
        if writer:
            args = {
                "cmd": command,
                "sandbox_permissions": "require_escalated",
                "justification": "w",
            }
            call = ("call_w", "exec_command", json.dumps(args))
            return Reply(events=responses_stream(function_call=call), held_until=codex_ends)
        if last_said(body) != "write the late note":
            return Reply(events=responses_stream(text="Late note"))  # a title codex asks for
        if "call_s" in outputs:
            codex_ends.set()
            return Reply(events=responses_stream(text="Spawned the writer."))
        spawn = {"task_name": "writer", "message": "write late.txt", "fork_turns": "none"}
        call = ("call_s", "spawn_agent", json.dumps(spawn))
        return Reply(events=responses_stream(function_call=call, namespace="collaboration"))

    model_server.queue(*[reply] * 12)
    ran = raven("agents", "run", "codex", "write the late note", "--json", env=env, cwd=work)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = json.loads(ran.stdout)
    assert out["answer"] == "Spawned the writer."
    assert out["decisions"] == [f"allow always: {command} (by auto)"]  # and no "stopped waiting"
    assert (work / "late.txt").read_text() == "late\n"


@pytest.mark.parametrize(
    ("permissions", "rules", "by"),
    [("read-only", [], "by read-only"), ("auto", [{"kind": ["edit"], "action": "escalate"}],
                                         "no answer: rejected")],
)  # fmt: skip
def test_read_only_and_an_escalate_rule_see_codexs_edit(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path,
    permissions: str, rules: list[dict[str, Any]], by: str,
) -> None:  # fmt: skip
    """Codex's apply_patch (outside its read-only sandbox) is asked of Raven: refused by
    `read-only`, escalated by the rule (nobody to ask here), and nothing is written."""
    work = tmp_path / "work"
    work.mkdir()
    agent = codex_agent(codex_acp, tmp_path / "codex-home", model_server, permissions)
    write_config(home, {"defaultModel": "echo", "agents": [{**agent, "rules": rules}]})
    patch = "*** Begin Patch\n*** Add File: note.md\n+hi\n*** End Patch\n"
    edit = Reply(events=responses_stream(custom_call=("call_p", "apply_patch", patch)))
    model_server.queue(edit, *[Reply(events=responses_stream(text="Not patched."))] * 6)
    ran = raven("agents", "run", "codex", "write the note", "--json", env=env, cwd=work)
    assert json.loads(ran.stdout)["decisions"] == [f"reject once: Edit files ({by})"]
    assert not (work / "note.md").exists()


class JsClient:
    """The official A2A JavaScript client (`a2a_js_client.mjs`), one command at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, folder: Path, base: str, token: str) -> JsClient:
        script = folder / JS_CLIENT.name
        proc = await asyncio.create_subprocess_exec(
            "node", str(script), base, token, cwd=folder,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    async def do(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        await self.proc.stdin.drain()
        async with asyncio.timeout(90):  # codex starts, and calls its model twice
            line = await self.proc.stdout.readline()
        answer: dict[str, Any] = json.loads(line)
        assert "error" not in answer, answer
        return answer

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await asyncio.wait_for(self.proc.wait(), 15)


async def test_codex_served_over_a2a_answers_the_js_client_asks_it_and_is_cancelled(
    codex_acp: Path,
    model_server: FakeModelServer,
    env: dict[str, str],
    home: Path,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    js = npm_install(tmp_path_factory, A2A_JS, beside=[JS_CLIENT])
    codex_home = tmp_path / "codex-home"
    configure(home, agents=[codex_agent(codex_acp, codex_home, model_server, "ask")])
    queue_the_note(model_server)
    server = start(env, "--agent", "codex")
    client = await JsClient.start(js, server.base, server.token)
    try:
        # Codex asks to run the command; its rules escalate: the peer is asked by taskId.
        task = await client.do(op="send", text="write the note")
        assert task["state"] == "TASK_STATE_INPUT_REQUIRED", task
        assert task["text"].startswith("Allow codex: ") and COMMAND in task["text"]
        done = await client.do(
            op="send", text="yes", taskId=task["id"], contextId=task["contextId"]
        )
        assert done == {**task, "state": "TASK_STATE_COMPLETED", "text": "The command ran it."}
        assert (home / "data" / "a2a-work" / "codex_note.txt").read_text() == "hi\n"

        # A task of the same conversation that codex works on, cancelled by the peer.
        def slow(body: dict[str, Any]) -> Reply:
            thinks = "think hard" in json.dumps(body)  # not a request of codex's own
            return Reply(events=responses_stream(text="too late"), delay_s=120 if thinks else 0)

        model_server.queue(*[slow] * 3)
        working = await client.do(
            op="send", text="think hard", contextId=task["contextId"], returnImmediately=True
        )
        async with asyncio.timeout(60):  # codex is waiting on its model
            while not any("think hard" in json.dumps(r.body) for r in model_server.requests):
                await asyncio.sleep(0.05)
        children = codex_processes(codex_home)
        cancelled = await client.do(op="cancel", taskId=working["id"])
        assert cancelled["state"] == "TASK_STATE_CANCELED"
        got = await client.do(op="get", taskId=working["id"])
        assert got["state"] == "TASK_STATE_CANCELED"
    finally:
        await client.close()
        assert server.stop() == 0
    logged = "".join(f.read_text() for f in (home / "logs").iterdir())
    assert "sub-agent codex: cancelled; it answered cancelled" in logged
    assert not [pid for pid in children if alive(pid)]  # stopped with the server


def test_codex_asks_a_raven_sibling_through_the_brokers_mcp_server(
    codex_acp: Path, model_server: FakeModelServer, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """codex takes the broker's `a2a` tool as the MCP server Raven lists in its session, and
    asks bob (a Raven sub-agent) with it; bob is woken with the task and answers."""
    bob_model = FakeModelServer().start()
    try:
        bob_config = tmp_path / "bob.json"
        bob_model_entry = {
            "id": "m",
            "provider": "openai",
            "baseUrl": bob_model.url + "/v1",
            "apiKey": "sk-test",
        }
        bob_config.write_text(json.dumps({"models": [bob_model_entry], "defaultModel": "m"}))
        bob = {
            "name": "bob",
            "command": RAVEN[0],
            "args": [*RAVEN[1:], "acp", "--config", str(bob_config)],
        }
        delegate = {"name": "delegate", "arguments": {"agent": "codex", "task": "ask bob"}}
        (home / "script.json").write_text(
            json.dumps([{"toolCalls": [delegate]}, {"text": "Done."}])
        )
        write_config(
            home,
            {
                "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
                "defaultModel": "s",
                "agents": [
                    codex_agent(codex_acp, tmp_path / "codex-home", model_server, "auto"),
                    bob,
                ],
            },
        )
        send = {"action": "send", "to": "bob", "text": "What is your favourite colour?"}
        cell = f"text(await tools.mcp__raven__a2a({json.dumps(send)}));"

        def after(body: dict[str, Any]) -> Reply:
            (output,) = [
                i["output"] for i in body["input"] if i["type"] == "custom_tool_call_output"
            ]
            said = re.search(r"Teal[^\"\\]*", json.dumps(output))
            return Reply(events=responses_stream(text=f"Bob says: {said[0] if said else output}"))

        model_server.queue(
            Reply(events=responses_stream(custom_call=("call_1", "exec", cell))), after
        )
        bob_model.queue(Reply(events=openai_stream(text="Teal, always teal.")))
        ran = raven("run", "--yes", "-o", "json", "ask bob through codex", env=env, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        session = json.loads(ran.stdout)["sessionId"]
        shown = json.loads(raven("sessions", "show", session, "--json", env=env).stdout)
        (result,) = [m for m in shown["messages"] if m["role"] == "tool"]
        assert "Bob says: Teal, always teal." in json.dumps(result)
        (task,) = shown["agentTasks"]
        assert (task["from"], task["to"], task["state"]) == ("codex", "bob", "completed")
        asked = [m for m in bob_model.requests[0].body["messages"] if m["role"] == "user"][-1]
        assert "codex gives you task bt_" in asked["content"]
        # Neither model saw a token: codex's requests carry the tool's name, not its env.
        assert "RAVEN_BROKER_TOKEN" not in json.dumps([r.body for r in model_server.requests])
    finally:
        bob_model.stop()

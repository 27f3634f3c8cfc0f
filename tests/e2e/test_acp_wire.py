"""`raven acp` fed raw bytes: bad input gets the protocol's error and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.acp_schema import AcpSchema
from tests.conftest import RAVEN, write_config
from tests.processes import ended, pid_from

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


def session_new(cwd: Path, request_id: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/new",
        "params": {"cwd": str(cwd), "mcpServers": []},
    }


class Wire:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, env: dict[str, str], *args: str) -> Wire:
        proc = await asyncio.create_subprocess_exec(
            *RAVEN,
            "acp",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            limit=32 * 1024 * 1024,
        )
        return cls(proc)

    async def send(self, message: Any) -> None:
        raw = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        await self.proc.stdin.drain()

    async def recv(self, timeout: float = 10) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        return json.loads(line)

    async def reply_to(self, request_id: Any, timeout: float = 10) -> dict[str, Any]:
        while True:
            msg = await self.recv(timeout)
            if "method" not in msg and msg.get("id") == request_id:
                return msg

    async def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return await asyncio.wait_for(self.proc.wait(), 10)


async def test_bad_frames_get_errors_and_the_server_keeps_serving(env: dict[str, str]) -> None:
    wire = await Wire.start(env)
    await wire.send({"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {}})
    assert (await wire.recv())["error"]["code"] == -32600
    await wire.send(b"{this is not json")
    parse = await wire.recv()
    assert parse["error"]["code"] == -32700 and parse["id"] is None
    await wire.send(INIT)
    assert (await wire.recv())["result"]["protocolVersion"] == 1
    await wire.send({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": [1, 2]})
    assert (await wire.recv())["error"]["code"] == -32602
    await wire.send({"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}})
    assert (await wire.recv())["error"]["code"] == -32601
    await wire.send({"jsonrpc": "2.0", "id": 4, "method": "_other/ext", "params": {}})
    assert (await wire.recv())["error"]["code"] == -32601
    await wire.send({"jsonrpc": "2.0", "method": "some/notification", "params": {}})
    await wire.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}})
    await wire.send(
        {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": "ses_x"}}
    )
    invalid = await wire.recv()
    assert invalid["id"] == 5 and invalid["error"]["code"] == -32602
    assert "prompt" in invalid["error"]["message"]
    await wire.send({"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {}})
    assert "sessions" in (await wire.recv())["result"]
    assert await wire.close() == 0


async def test_deep_json_and_invalid_requests_without_id_get_errors(env: dict[str, str]) -> None:
    wire = await Wire.start(env)
    await wire.send(b"[" * 100_000 + b"]" * 100_000)
    deep = await wire.recv()
    assert deep["error"]["code"] == -32700 and deep["id"] is None
    nested = b'{"a":' * 5000 + b"1" + b"}" * 5000
    await wire.send(b'{"jsonrpc":"2.0","id":9,"method":"x","params":' + nested + b"}")
    assert (await wire.recv())["error"]["code"] == -32700
    for invalid in ({"jsonrpc": "aaa", "method": "session/list"}, {"jsonrpc": "2.0"}):
        await wire.send(invalid)
        answer = await wire.recv()
        assert answer["error"]["code"] == -32600 and answer["id"] is None
    await wire.send(INIT)
    assert (await wire.recv())["result"]["protocolVersion"] == 1
    assert await wire.close() == 0


def test_end_of_input_on_dev_null_exits_0(env: dict[str, str]) -> None:
    with open(os.devnull, "rb") as devnull:
        done = subprocess.run(
            [*RAVEN, "acp"], stdin=devnull, env=env, capture_output=True, timeout=20
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""


async def test_initialize_answers_version_1_whatever_was_asked(env: dict[str, str]) -> None:
    wire = await Wire.start(env)
    for request_id, version in enumerate(["2024-11-05", 7, None]):
        await wire.send(
            {
                **INIT,
                "id": request_id,
                "params": {"protocolVersion": version, "clientCapabilities": {}},
            }
        )
        assert (await wire.recv())["result"]["protocolVersion"] == 1
    assert await wire.close() == 0


async def test_invalid_config_is_reported_on_session_new_not_at_start(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    (home / "config.json").write_text('{"models": 3}')
    wire = await Wire.start(env)
    await wire.send(INIT)
    await wire.recv()
    await wire.send(session_new(tmp_path, 2))
    error = (await wire.recv())["error"]
    assert "configuration is invalid" in error["message"] and "models" in error["message"]
    assert await wire.close() == 0


async def test_eof_when_idle_exits_0_within_2s(env: dict[str, str]) -> None:
    wire = await Wire.start(env)
    await wire.send(INIT)
    await wire.recv()
    started = time.monotonic()
    assert await wire.close() == 0
    assert time.monotonic() - started < 2.0


async def test_eof_mid_turn_cancels_it_and_exits_within_5s(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    script = [
        {
            "toolCalls": [
                {
                    "name": "run_command",
                    "arguments": {"command": f"sleep 60 & echo $! > {pidfile}; wait"},
                }
            ]
        }
    ]
    (home / "script.json").write_text(json.dumps(script))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "modes": [{"id": "auto", "name": "Auto", "approvals": "auto"}],
        },
    )
    wire = await Wire.start(env)
    await wire.send(INIT)
    await wire.recv()
    await wire.send(session_new(tmp_path, 2))
    sid = (await wire.reply_to(2))["result"]["sessionId"]
    await wire.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
        }
    )
    await pid_from(pidfile)
    started = time.monotonic()
    assert wire.proc.stdin is not None
    wire.proc.stdin.close()
    answer = await wire.reply_to(3)
    assert answer["result"]["stopReason"] == "cancelled"
    assert await asyncio.wait_for(wire.proc.wait(), 10) == 0
    assert time.monotonic() - started < 5.0
    assert await ended([int(pidfile.read_text())], 5)


def test_stray_prints_and_fd_1_writes_go_to_stderr_not_the_frame_stream() -> None:
    import subprocess
    import sys

    code = (
        "import os\n"
        "from raven.jsonrpc.stdio import reserve_stdout\n"
        "fd = reserve_stdout()\n"
        "print('stray print')\n"
        "os.write(1, b'raw fd write\\n')\n"
        "os.system('echo child output')\n"
        'os.write(fd, b\'{"jsonrpc":"2.0"}\\n\')\n'
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"jsonrpc":"2.0"}\n'
    for noise in ("stray print", "raw fd write", "child output"):
        assert noise in result.stderr


async def test_a_corrupt_session_store_is_reported_and_the_server_keeps_serving(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    write_config(home, {"defaultModel": "echo"})
    (home / "data").mkdir()
    (home / "data" / "raven.db").write_bytes(b"garbage" * 1000)
    wire = await Wire.start(env)
    await wire.send(INIT)
    await wire.recv()
    new = session_new(tmp_path, 2)
    await wire.send(new)
    error = (await wire.reply_to(2))["error"]
    assert error["code"] == -32603 and "cannot open the session store" in error["message"]
    await wire.send({**new, "id": 3, "method": "no/such"})
    assert (await wire.reply_to(3))["error"]["code"] == -32601
    assert await wire.close() == 0


async def test_no_model_says_what_works_and_model_flag_picks_one(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    wire = await Wire.start(env)
    await wire.send(INIT)
    await wire.recv()
    await wire.send(session_new(tmp_path, 2))
    error = (await wire.recv())["error"]
    assert error["code"] == -32000 and error["data"] == {"authMethods": ["setup"]}
    message = error["message"]
    assert "`raven setup`" in message and str(home / "config.json") in message
    assert "--model echo" in message
    assert "OPENAI_API_KEY" in message and "ANTHROPIC_API_KEY" in message
    await wire.send(
        {"jsonrpc": "2.0", "id": 3, "method": "authenticate", "params": {"methodId": "setup"}}
    )
    assert (await wire.recv())["result"] == {}
    await wire.send(
        {"jsonrpc": "2.0", "id": 4, "method": "authenticate", "params": {"methodId": "x"}}
    )
    assert (await wire.recv())["error"]["code"] == -32602
    # `raven setup` writes a model while this process runs: its next session/new has it.
    (home / "x.json").write_text("[]")
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "x.json"}]})
    await wire.send(session_new(tmp_path, 5))
    result = (await wire.reply_to(5))["result"]
    assert {o["id"]: o["currentValue"] for o in result["configOptions"]}["model"] == "s"
    assert await wire.close() == 0

    write_config(home, {"modes": [{"id": "ask", "name": "Ask"}, {"id": "go", "name": "Go"}]})
    flagged = await Wire.start(env, "--model", "echo", "--mode", "go")
    await flagged.send(INIT)
    await flagged.recv()
    await flagged.send(session_new(tmp_path, 2))
    result = (await flagged.recv())["result"]
    assert result["modes"]["currentModeId"] == "go"
    options = {o["id"]: o["currentValue"] for o in result["configOptions"]}
    assert options["model"] == "echo"
    assert await flagged.close() == 0


async def test_a_client_that_runs_terminal_auth_is_offered_raven_setup_there(
    env: dict[str, str],
) -> None:
    from acp import schema

    offered = {}
    for caps in ({"auth": {"terminal": True}}, {}):
        wire = await Wire.start(env)
        await wire.send({**INIT, "params": {**INIT["params"], "clientCapabilities": caps}})
        result = (await wire.recv())["result"]
        assert schema.InitializeResponse.model_validate(result)
        (method,) = result["authMethods"]
        offered[bool(caps)] = method
        assert await wire.close() == 0
    assert offered[True]["type"] == "terminal" and offered[False]["type"] == "agent"
    assert offered[True]["id"] == offered[False]["id"] == "setup"
    # the editor runs Raven's own command with these arguments in its terminal
    assert offered[True]["args"] == ["setup"] and "args" not in offered[False]
    ran = subprocess.run(
        [*RAVEN, "setup", "--help"], env=env, capture_output=True, text=True, timeout=30
    )
    assert ran.returncode == 0 and "model" in ran.stdout


async def test_an_unknown_model_flag_is_exit_2_before_any_frame(env: dict[str, str]) -> None:
    wire = await Wire.start(env, "--model", "nope")
    assert await asyncio.wait_for(wire.proc.wait(), 10) == 2
    assert wire.proc.stdout is not None and await wire.proc.stdout.read() == b""


async def test_initialize_is_answered_before_any_heavy_import(
    env: dict[str, str], home: Path
) -> None:
    proc = await asyncio.create_subprocess_exec(
        *RAVEN[:1],
        "-X",
        "importtime",
        *RAVEN[1:],
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(json.dumps(INIT).encode() + b"\n"), 30)
    assert proc.returncode == 0
    assert json.loads(out)["result"]["protocolVersion"] == 1
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.decode().splitlines()}
    assert "raven.acp.lazy" in imported
    heavy = ("typer", "rich", "httpx", "aiohttp", "a2a", "mcp", "pydantic", "raven.engine")
    assert sorted(m for m in imported if m.split(".")[0] in heavy or m in heavy) == []


async def test_an_editor_asking_for_acp_v2_gets_a_clean_v1_and_a_working_session(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """Today's adapters and editors negotiate v2 when they may: Raven answers with the
    version it speaks, as ACP's negotiation has it, and the editor goes on in v1."""
    from acp import schema

    write_config(home, {"defaultModel": "echo"})
    wire = await Wire.start(env)
    await wire.send({**INIT, "params": {"protocolVersion": 2, "clientCapabilities": {}}})
    answered = schema.InitializeResponse.model_validate((await wire.reply_to(1))["result"])
    assert answered.protocol_version == 1
    await wire.send(session_new(tmp_path, 2))
    assert "sessionId" in (await wire.reply_to(2))["result"]
    assert await wire.close() == 0


async def test_the_fast_initialize_says_what_the_full_server_says(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    write_config(home, {"defaultModel": "echo"})
    wire = await Wire.start(env)
    await wire.send(INIT)
    fast = await wire.recv()
    await wire.send(session_new(tmp_path, 2))
    assert "result" in await wire.reply_to(2)
    await wire.send({**INIT, "id": 3})
    full = await wire.reply_to(3)
    assert await wire.close() == 0
    assert fast["result"] == full["result"]


async def test_requests_before_initialize_are_refused_on_the_fast_path(
    env: dict[str, str], tmp_path: Path
) -> None:
    wire = await Wire.start(env)
    await wire.send(session_new(tmp_path, 1))
    error = (await wire.recv())["error"]
    assert error["code"] == -32600 and "initialize" in error["message"]
    assert await wire.close() == 0


def test_raven_acp_help_still_lists_its_options(env: dict[str, str]) -> None:
    from tests.conftest import raven

    shown = raven("acp", "--help", env={**env, "COLUMNS": "120"})
    assert shown.returncode == 0
    for option in ("--model", "--mode", "--config"):
        assert option in shown.stdout
    wrong = raven("acp", "--bogus", env=env)
    assert wrong.returncode == 2 and "No such option" in wrong.stderr


SDK_AGENT = Path(__file__).parents[1] / "acp_client" / "sdk_agent.py"


async def delegating(
    env: dict[str, str], home: Path, tmp_path: Path, agent: dict[str, Any], task: str, text: str
) -> tuple[Wire, str]:
    """An editor showing sub-agents, on a `raven acp` whose model hands `task` to the SDK
    test `agent`, then says `text`; the prompt (id 3) sent. The wire and the session."""
    helper = {"name": "helper", "command": sys.executable, **agent}
    delegate = {"name": "delegate", "arguments": {"agent": "helper", "task": task}}
    (home / "script.json").write_text(json.dumps([{"toolCalls": [delegate]}, {"text": text}]))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "modes": [{"id": "auto", "name": "Auto", "approvals": "auto"}],
            "agents": [helper],
        },
    )
    wire = await Wire.start(env)
    caps = {"subagents": {}}
    await wire.send({**INIT, "params": {"protocolVersion": 1, "clientCapabilities": caps}})
    init = await wire.reply_to(1)
    assert init["result"]["agentCapabilities"]["sessionCapabilities"]["subagents"] == {}
    await wire.send(session_new(tmp_path, 2))
    sid = (await wire.reply_to(2))["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "delegate it"}]}
    await wire.send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt})
    return wire, sid


async def read_updates(
    wire: Wire, updates: list[tuple[str, dict[str, Any]]], until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Raven's messages, their updates kept in `updates` (session, update), until one for
    which `until` holds: that one."""
    while True:
        msg = await wire.recv(30)
        if msg.get("method") == "session/update":
            updates.append((msg["params"]["sessionId"], msg["params"]["update"]))
        if until(msg):
            return msg


def answered(msg: dict[str, Any]) -> bool:
    """The prompt's answer (id 3)."""
    return msg.get("id") == 3


def announcing(msg: dict[str, Any]) -> bool:
    """A `subagent_update` with a title: a child session announced."""
    update = msg.get("params", {}).get("update", {}) if msg.get("method") else {}
    return update.get("sessionUpdate") == "subagent_update" and "title" in update


async def test_an_editor_that_shows_subagents_gets_each_delegate_as_a_child_session(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """ACP's sub-agent sessions (`clientCapabilities.subagents`, `subagent_update`), as
    Claude's and Codex's adapters speak them; the Python SDK does not carry them yet, so this
    editor is raw JSON-RPC and the TypeScript SDK's unstable schema reads every update."""
    from tests.children import scripted_child

    write = {"name": "write_file", "arguments": {"path": "by-child.txt", "content": "child"}}
    child_steps = [{"toolCalls": [write]}, {"text": "Child done.\nAll written."}]
    helper = scripted_child(tmp_path / "child", child_steps, permissions="ask")
    wire, sid = await delegating(env, home, tmp_path, helper, "write it", "Done.")
    updates: list[tuple[str, dict[str, Any]]] = []
    asked: list[dict[str, Any]] = []
    while True:
        msg = await wire.recv(30)
        if msg.get("method") == "session/request_permission":
            asked.append(msg["params"])
            answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
            await wire.send({"jsonrpc": "2.0", "id": msg["id"], "result": answer})
        elif msg.get("method") == "session/update":
            updates.append((msg["params"]["sessionId"], msg["params"]["update"]))
        elif msg.get("id") == 3:
            assert msg["result"]["stopReason"] == "end_turn"
            break
    assert await wire.close() == 0
    assert (tmp_path / "by-child.txt").read_text() == "child"
    kinds = [(s == sid, u["sessionUpdate"]) for s, u in updates]
    announced, ended_update = [u for _, u in updates if u["sessionUpdate"] == "subagent_update"]
    child = announced["sessionId"]
    assert announced["title"] == "helper" and announced["description"] == "write it"
    assert announced["state"] == {"state": "running"} and child != sid
    assert announced["capabilities"] == {"cancel": {}}  # it may be cancelled on its own
    # Announced on the parent before anything of the child; ended there once, before the
    # delegate call's own end.
    first_child = next(i for i, (s, _) in enumerate(updates) if s == child)
    assert kinds.index((True, "subagent_update")) < first_child
    assert ended_update == {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "state": {"state": "idle", "stopReason": "end_turn"},
    }
    ended = len(kinds) - 1 - kinds[::-1].index((True, "subagent_update"))
    last_child = max(i for i, (s, _) in enumerate(updates) if s == child)
    delegate_done = next(
        i
        for i, (s, u) in enumerate(updates)
        if s == sid and u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
    )
    assert last_child < ended < delegate_done
    # The child's tool call and its words, in the child's own session.
    in_child = [u for s, u in updates if s == child]
    assert [u["sessionUpdate"] for u in in_child] == [
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "agent_message_chunk",
    ]
    assert in_child[0]["title"] == "Write by-child.txt" and in_child[1]["status"] == "completed"
    said = "".join(u["content"]["text"] for u in in_child if "content" in u)
    assert said == "Child done.\nAll written."
    # Nothing of the child is progress of the parent's delegate call any more.
    assert not [
        u for s, u in updates if s == sid and u.get("status") == "in_progress" and u.get("content")
    ]
    # What the child asks, the editor is asked on the parent's session.
    (permission,) = asked
    assert permission["sessionId"] == sid and "helper" in permission["toolCall"]["title"]
    sent = [{"sessionId": session_id, "update": update} for session_id, update in updates]
    read = acp_schema.read([("zSessionNotification", frame, "unstable") for frame in sent])
    assert [r.get("error") for r in read] == [None] * len(sent)
    # and no field was dropped as unreadable on the way (the schema forgives some)
    assert [
        r["ok"]["update"] for r in read if r["ok"]["update"]["sessionUpdate"] == ("subagent_update")
    ] == [announced, ended_update]


async def test_a_delegated_agents_own_sub_agent_is_a_child_of_its_session_in_the_editor(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """The editor's tree goes one level deeper: the agent Raven delegates to announces a
    sub-agent of its own, which the editor gets announced on the agent's session, with
    its doings under its own id, ended there before the agent ends."""
    agent = {"args": [str(SDK_AGENT), "grandchild"]}
    wire, sid = await delegating(env, home, tmp_path, agent, "greet", "Done.")
    updates: list[tuple[str, dict[str, Any]]] = []
    await read_updates(wire, updates, answered)
    assert await wire.close() == 0
    tree = [(s, u) for s, u in updates if u["sessionUpdate"] == "subagent_update"]
    (child,) = {u["sessionId"] for s, u in tree if s == sid}
    grandchild = f"{child}/s1/task-1"  # under the session id the agent gave it
    assert tree == [
        (sid, {"sessionUpdate": "subagent_update", "sessionId": child, "title": "helper",
               "description": "greet", "capabilities": {"cancel": {}},
               "state": {"state": "running"}}),
        (child, {"sessionUpdate": "subagent_update", "sessionId": grandchild, "title": "writer",
                 "description": "say hello", "state": {"state": "running"}}),
        (child, {"sessionUpdate": "subagent_update", "sessionId": grandchild,
                 "state": {"state": "idle", "stopReason": "end_turn"}}),
        (sid, {"sessionUpdate": "subagent_update", "sessionId": child,
               "state": {"state": "idle", "stopReason": "end_turn"}}),
    ]  # fmt: skip
    order = [(s, u["sessionUpdate"]) for s, u in updates]
    announced = order.index((child, "subagent_update"))
    in_grandchild = [i for i, (s, _) in enumerate(order) if s == grandchild]
    assert announced < min(in_grandchild) and max(in_grandchild) < len(order) - 1
    doings = [u for s, u in updates if s == grandchild]
    # (its words reach the editor at a line's end, here its end)
    assert [u["sessionUpdate"] for u in doings] == ["tool_call", "agent_message_chunk"]
    assert doings[0]["title"] == "Read notes.txt"
    assert doings[1]["content"]["text"] == "Grandchild says hello."
    said = [u["content"]["text"] for s, u in updates if s == child and "content" in u]
    assert "".join(said) == "Done."  # the agent's own words stay in its own session
    sent = [{"sessionId": session_id, "update": update} for session_id, update in updates]
    read = acp_schema.read([("zSessionNotification", frame, "unstable") for frame in sent])
    assert [r.get("error") for r in read] == [None] * len(sent)
    assert [(f["sessionId"], f["update"]) for f in (r["ok"] for r in read)] == updates


async def test_an_editor_cancels_a_delegated_agents_child_session_and_the_turn_goes_on(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """`session/cancel` on a child session (announced with `capabilities.cancel`) stops that
    agent's task only: the agent is told to cancel, the child ends cancelled, the delegate
    call fails as cancelled, and the parent's model goes on to answer."""
    pidfile = tmp_path / "hang.pid"
    agent = {"args": [str(SDK_AGENT), "hang"], "env": {"HANG_PIDFILE": str(pidfile)}}
    wire, sid = await delegating(env, home, tmp_path, agent, "wait", "The helper was stopped.")
    updates: list[tuple[str, dict[str, Any]]] = []
    child = (await read_updates(wire, updates, announcing))["params"]["update"]["sessionId"]
    await pid_from(pidfile)  # the agent works on its task
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": child}}
    await wire.send(cancel)
    msg = await read_updates(wire, updates, answered)
    assert msg["result"]["stopReason"] == "end_turn"  # the parent's turn went on
    assert await wire.close() == 0
    tree = [u for s, u in updates if u["sessionUpdate"] == "subagent_update" and s == sid]
    assert tree[-1] == {
        "sessionUpdate": "subagent_update",
        "sessionId": child,
        "state": {"state": "idle", "stopReason": "cancelled"},
    }
    (failed,) = [u for s, u in updates if s == sid and u.get("status") == "failed"]
    assert "Cancelled" in json.dumps(failed["content"])
    said = [u["content"]["text"] for s, u in updates if s == sid and "content" in u
            and u["sessionUpdate"] == "agent_message_chunk"]  # fmt: skip
    assert "".join(said) == "The helper was stopped."
    logged = "".join(f.read_text() for f in (home / "logs").iterdir())
    assert "sub-agent helper: cancelled; it answered cancelled" in logged, logged
    sent = [{"sessionId": session_id, "update": update} for session_id, update in updates]
    read = acp_schema.read([("zSessionNotification", frame, "unstable") for frame in sent])
    assert [r.get("error") for r in read] == [None] * len(sent)


async def test_an_editor_cancels_a_delegated_agents_own_sub_agent_through_raven(
    env: dict[str, str], home: Path, tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """The agent lets its own sub-agent be cancelled (`capabilities.cancel`, as codex-acp
    does while one runs): Raven shows that to the editor, and passes the editor's
    `session/cancel` on to the agent, naming the sub-agent's own session; the agent's task
    and the parent's turn go on."""
    agent = {"args": [str(SDK_AGENT), "cancellable-grandchild"]}
    wire, sid = await delegating(env, home, tmp_path, agent, "write", "Ok.")
    updates: list[tuple[str, dict[str, Any]]] = []
    await read_updates(wire, updates, announcing)  # the agent's session
    announced = (await read_updates(wire, updates, announcing))["params"]["update"]
    assert announced["capabilities"] == {"cancel": {}}  # its sub-agent's, on the agent's
    cancel = {"sessionId": announced["sessionId"]}
    await wire.send({"jsonrpc": "2.0", "method": "session/cancel", "params": cancel})
    msg = await read_updates(wire, updates, answered)
    assert msg["result"]["stopReason"] == "end_turn"
    assert await wire.close() == 0
    child = next(
        u["sessionId"] for s, u in updates if s == sid and u["sessionUpdate"] == "subagent_update"
    )
    tree = [(s, u) for s, u in updates if u["sessionUpdate"] == "subagent_update"]
    writers = announced["sessionId"]
    assert tree[1:] == [
        (child, announced),
        (child, {"sessionUpdate": "subagent_update", "sessionId": writers, "capabilities": None}),
        (child, {"sessionUpdate": "subagent_update", "sessionId": writers,
                 "state": {"state": "idle", "stopReason": "cancelled"}}),
        (sid, {"sessionUpdate": "subagent_update", "sessionId": child,
               "state": {"state": "idle", "stopReason": "end_turn"}}),
    ]  # fmt: skip
    said = [u["content"]["text"] for s, u in updates if s == child and "content" in u]
    assert "".join(said) == "writer cancelled"  # the agent's task went on, and answered
    sent = [{"sessionId": session_id, "update": update} for session_id, update in updates]
    read = acp_schema.read([("zSessionNotification", frame, "unstable") for frame in sent])
    assert [r.get("error") for r in read] == [None] * len(sent)


def test_the_pinned_schema_reads_frames_as_the_typescript_sdk_does(acp_schema: AcpSchema) -> None:
    """What every editor-facing test checks Raven's frames with: ACP v1.25 as the SDK
    reads it, stable unless the frame is one only the unstable schema has."""
    notice = {"sessionUpdate": "notice", "severity": "info", "title": "model changed"}
    child = {"sessionUpdate": "subagent_update", "sessionId": "c1", "state": {"state": "running"}}
    read = acp_schema.read(
        [
            ("zSessionNotification", {"sessionId": "s1", "update": notice}, "stable"),
            ("zSessionNotification", {"sessionId": "s1", "update": child}, "stable"),
            ("zSessionNotification", {"sessionId": "s1", "update": child}, "unstable"),
            ("zPromptResponse", {"stopReason": "finished"}, "stable"),
        ]
    )
    assert ["ok" in r for r in read] == [True, False, True, False]

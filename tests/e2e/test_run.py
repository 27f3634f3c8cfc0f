"""`raven run`, `raven sessions` and `raven config` launched as a user launches them."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import RAVEN, raven, write_config
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream
from tests.processes import ended_within, pid_from


def test_echo_model_answers_offline(env: dict[str, str], tmp_path: Path) -> None:
    result = raven("run", "--model", "echo", "hello from the test", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from the test\n"
    assert "session ses_" in result.stderr


def test_no_model_configured_says_how_to_fix_it(env: dict[str, str]) -> None:
    result = raven("run", "hi", env=env)
    assert result.returncode == 2
    assert "no model is configured" in result.stderr and "--model echo" in result.stderr
    assert result.stdout == ""


def test_invalid_config_is_exit_2_naming_the_file(env: dict[str, str], home: Path) -> None:
    (home / "config.json").write_text('{"models": [}')
    result = raven("run", "--model", "echo", "hi", env=env)
    assert result.returncode == 2
    assert str(home / "config.json") in result.stderr and "line 1" in result.stderr
    assert (home / "config.json").read_text() == '{"models": [}'


def test_a_config_nested_too_deeply_is_exit_2_in_one_line(env: dict[str, str], home: Path) -> None:
    deep = '{"models": ' + "[" * 50_000 + "]" * 50_000 + "}"
    (home / "config.json").write_text(deep)
    result = raven("run", "--model", "echo", "hi", env=env)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "nested too deeply" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert (home / "config.json").read_text() == deep


def test_openai_provider_streams_through_run_with_a_tool_call(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    write_config(
        home,
        {
            "models": [
                {
                    "id": "gpt",
                    "provider": "openai",
                    "model": "gpt-x",
                    "baseUrl": model_server.url + "/v1",
                    "apiKeyEnv": "TEST_KEY",
                }
            ]
        },
    )
    (tmp_path / "data.txt").write_text("forty-two\n")
    model_server.queue(
        Reply(events=openai_stream(tool_calls=[("c1", "read_file", '{"path": "data.txt"}')])),
        Reply(events=openai_stream(text="The answer is forty-two.")),
    )
    result = raven("run", "what is in data.txt?", env={**env, "TEST_KEY": "sk-abc"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "The answer is forty-two."
    assert "Read data.txt" in result.stderr
    second = model_server.requests[1].body["messages"]
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "forty-two\n"}
    assert model_server.requests[0].headers["Authorization"] == "Bearer sk-abc"


def test_provider_401_is_a_clear_failure(
    env: dict[str, str], home: Path, model_server: FakeModelServer
) -> None:
    write_config(
        home,
        {
            "models": [
                {
                    "id": "gpt",
                    "provider": "openai",
                    "model": "gpt-x",
                    "baseUrl": model_server.url + "/v1",
                    "apiKey": "sk-leak",
                }
            ]
        },
    )
    model_server.queue(Reply(status=401, body='{"error":{"message":"bad key sk-leak"}}'))
    result = raven("run", "hi", env=env)
    assert result.returncode == 1
    assert "API key was refused" in result.stderr and "sk-leak" not in result.stderr
    # The session remembers how its last turn ended.
    (listed,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    assert "API key was refused" in listed["failure"] and "sk-leak" not in listed["failure"]
    shown = raven("sessions", "show", listed["id"], env=env).stdout
    assert "the last turn failed: " in shown and "(HTTP 401)" in shown


def test_edits_are_denied_without_a_terminal_unless_yes(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    script = home / "script.json"
    step = {
        "toolCalls": [
            {"name": "write_file", "arguments": {"path": "out.txt", "content": "written"}}
        ]
    }
    script.write_text(json.dumps([step, {"text": "done"}]))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    denied = raven("run", "write it", env=env, cwd=tmp_path)
    assert denied.returncode == 0
    assert not (tmp_path / "out.txt").exists()
    assert "pass --yes" in denied.stderr
    allowed = raven("run", "--yes", "write it", env=env, cwd=tmp_path)
    assert allowed.returncode == 0
    assert (tmp_path / "out.txt").read_text() == "written"


def test_the_model_is_told_why_a_call_was_not_run(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    step = {"toolCalls": [{"name": "write_file", "arguments": {"path": "o.txt", "content": "x"}}]}
    (home / "script.json").write_text(json.dumps([step, {"text": "ok"}] * 2))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "modes": [
                {"id": "ask", "name": "Ask"},
                {"id": "ro", "name": "Read only", "approvals": "deny"},
            ],
        },
    )

    def told(*args: str) -> tuple[str, str]:
        """What the person saw (the event), and what the model was told (the stored result)."""
        ran = raven("run", "-o", "jsonl", *args, "write it", env=env, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        events = list(map(json.loads, ran.stdout.splitlines()))
        failed = [e for e in events if e["type"] == "ToolCallUpdated" and e["status"] == "failed"]
        session = json.loads(raven("sessions", "list", "--json", env=env).stdout)[0]["id"]
        shown = json.loads(raven("sessions", "show", session, "--json", env=env).stdout)
        (result,) = [m["content"] for m in shown["messages"] if m["role"] == "tool"]
        return failed[0]["content"], result

    seen, unasked = told()  # no terminal to ask on: no person said no
    assert "no one could be asked" in unasked and "rejected" not in unasked
    assert (
        seen == "Not run: no one answered the approval request in time, or no one could be asked."
    )
    seen, refused = told("--mode", "ro")
    assert "refused by policy" in refused and "rejected" not in refused
    assert "Do not retry" in refused and "retry" not in seen and "refuses it" in seen
    assert not (tmp_path / "o.txt").exists()


def test_max_turn_steps_is_a_nonzero_exit(env: dict[str, str], home: Path) -> None:
    script = home / "loop.json"
    script.write_text(json.dumps([{"toolCalls": [{"name": "list_dir"}]}] * 3))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "loop.json"}],
            "limits": {"maxTurnSteps": 2},
        },
    )
    result = raven("run", "loop", env=env)
    assert result.returncode == 3 and "maxTurnSteps" in result.stderr


def test_sessions_list_show_delete_and_continue(env: dict[str, str], tmp_path: Path) -> None:
    first = raven("run", "--model", "echo", "remember the tulips", env=env, cwd=tmp_path)
    session_id = first.stderr.split("session ")[1].split()[0]
    again = raven("run", "--model", "echo", "--session", session_id, "second turn", env=env)
    assert again.returncode == 0 and again.stdout.strip() == "second turn"
    listed = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    assert [s["id"] for s in listed] == [session_id]
    assert listed[0]["title"] == "remember the tulips" and listed[0]["cwd"] == str(tmp_path)
    shown = json.loads(raven("sessions", "show", session_id, "--json", env=env).stdout)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant"] * 2
    profiled = {**env, "PYTHONPROFILEIMPORTTIME": "1"}
    text = raven("sessions", "show", session_id, env=profiled)
    assert "remember the tulips" in text.stdout and "second turn" in text.stdout
    for reading in (text, raven("sessions", "search", "tulips", env=profiled)):
        # reading what is stored costs what the store costs: no engine, tools or models
        imported = {line.rsplit("|", 1)[-1].strip() for line in reading.stderr.splitlines()}
        assert "raven.sessions.sqlite" in imported
        heavy = ("raven.engine", "raven.tools", "raven.providers")
        assert sorted(m for m in imported if m.startswith(heavy)) == []
    assert raven("sessions", "delete", session_id, env=env).returncode == 0
    missing = raven("sessions", "show", session_id, env=env)
    assert missing.returncode == 1 and "no session" in missing.stderr
    assert json.loads(raven("sessions", "list", "--json", env=env).stdout) == []


def test_deleting_a_session_whose_turn_runs_in_another_process_is_refused(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    command = "touch started; while [ ! -f go ]; do sleep 0.02; done"
    steps = [
        {"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]},
        {"text": "Done waiting."},
    ]
    (home / "script.json").write_text(json.dumps(steps))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    proc = subprocess.Popen(
        [*RAVEN, "run", "--yes", "wait for go"],
        env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        asyncio.run(until_exists(tmp_path / "started"))
        (listed,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
        refused = raven("sessions", "delete", listed["id"], env=env)
        assert refused.returncode == 1
        assert f"in another Raven process, pid {proc.pid}" in refused.stderr
        (tmp_path / "go").touch()
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert stdout.strip() == "Done waiting." and "Traceback" not in stderr
    shown = json.loads(raven("sessions", "show", listed["id"], "--json", env=env).stdout)
    assert [m["role"] for m in shown["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert raven("sessions", "delete", listed["id"], env=env).returncode == 0  # now it may go


async def until_exists(path: Path, timeout_s: float = 20) -> None:
    async with asyncio.timeout(timeout_s):
        while not path.exists():
            await asyncio.sleep(0.02)


def test_config_init_show_and_path(env: dict[str, str], home: Path) -> None:
    assert raven("config", "init", env={**env, "ANTHROPIC_API_KEY": "k"}).returncode == 0
    path = home / "config.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = raven("config", "init", env=env)
    assert again.returncode == 0 and "nothing changed" in again.stdout
    data = json.loads(path.read_text())
    data["models"][0]["apiKey"] = "sk-very-secret"
    path.write_text(json.dumps(data))
    shown = raven("config", "show", env=env)
    assert "sk-very-secret" not in shown.stdout and '"apiKey": "***"' in shown.stdout
    paths = raven("config", "path", env=env).stdout
    assert f"config: {path}" in paths and str(home / "logs") in paths


def test_config_option_selects_another_file(env: dict[str, str], tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps({"models": [{"id": "mine", "provider": "scripted"}], "defaultModel": "mine"})
    )
    result = raven("run", "--config", str(other), "via option", env=env)
    assert result.returncode == 0 and result.stdout.strip() == "via option"
    via_env = raven("run", "via env", env={**env, "RAVEN_CONFIG": str(other)})
    assert via_env.returncode == 0 and via_env.stdout.strip() == "via env"
    before = raven("--config", str(other), "run", "before the command", env=env)
    assert before.returncode == 0, before.stderr  # a global option, as in `git -C`
    assert before.stdout.strip() == "before the command"
    missing = raven("--config", str(tmp_path / "nope.json"), "run", "x", env=env)
    assert missing.returncode == 2 and "nope.json: no such config file" in missing.stderr


def test_a_corrupt_session_store_is_a_clear_error(env: dict[str, str], home: Path) -> None:
    (home / "data").mkdir()
    (home / "data" / "raven.db").write_bytes(b"this is not a database at all" * 100)
    result = raven("run", "--model", "echo", "hi", env=env)
    assert result.returncode == 1
    assert "cannot open the session store" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unknown_session_is_a_clear_error(env: dict[str, str]) -> None:
    result = raven("run", "--model", "echo", "--session", "ses_nope", "hi", env=env)
    assert result.returncode == 1 and "no session 'ses_nope'" in result.stderr


def test_a_config_others_can_read_holding_a_secret_is_warned_about_once(
    env: dict[str, str], home: Path
) -> None:
    path = write_config(
        home,
        {
            "models": [{"id": "gpt", "provider": "openai", "apiKey": "sk-abc"}],
            "defaultModel": "echo",
        },
    )
    path.chmod(0o644)
    result = raven("run", "hi", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(f"chmod 600 {path}") == 1 and "sk-abc" not in result.stderr
    shown = raven("config", "show", env=env)
    assert "(mode 0644)" in shown.stderr
    path.chmod(0o600)
    quiet = raven("run", "hi", env=env)
    assert "chmod" not in quiet.stderr
    path.chmod(0o644)
    write_config(home, {"defaultModel": "echo"}).chmod(0o644)
    assert "chmod" not in raven("run", "hi", env=env).stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_stops_the_turn_and_its_commands(
    signum: int, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    shfile, pidfile = tmp_path / "sh", tmp_path / "pid"
    command = f"echo $$ > {shfile}; sleep 60 & echo $! > {pidfile}; wait"
    (home / "script.json").write_text(
        json.dumps([{"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]}])
    )
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    proc = subprocess.Popen(
        [*RAVEN, "run", "--yes", "sleep please"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sleeper, shell = asyncio.run(pid_from(pidfile)), asyncio.run(pid_from(shfile))
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, stderr
    assert ended_within([sleeper, shell])
    listed = raven("sessions", "list", "--json", env=env)
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1


def test_a_server_without_usage_gets_an_estimate_and_a_mode_prompt_is_sent(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    write_config(
        home,
        {
            "models": [{"id": "local", "provider": "openai", "baseUrl": model_server.url + "/v1"}],
            "modes": [{"id": "terse", "name": "Terse", "systemPrompt": "One word answers."}],
        },
    )
    model_server.queue(Reply(events=openai_stream(text="Fine.", usage=None)))
    result = raven("run", "--mode", "terse", "how are you?", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    sent = model_server.requests[0].body
    assert sent["messages"][0] == {"role": "system", "content": "One word answers."}
    assert sent["stream_options"] == {"include_usage": True}
    assert "Authorization" not in model_server.requests[0].headers


def test_sessions_show_json_is_camel_case_throughout(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hi\n")
    step = {"toolCalls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}
    (home / "script.json").write_text(json.dumps([step, {"text": "done"}]))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    first = raven("run", "read it", env=env, cwd=tmp_path)
    session_id = first.stderr.split("session ")[1].split()[0]
    shown = json.loads(raven("sessions", "show", session_id, "--json", env=env).stdout)

    def keys(value: object) -> set[str]:
        if isinstance(value, dict):
            inner = {k: v for k, v in value.items() if k != "arguments"}
            return set(inner) | {k for v in inner.values() for k in keys(v)}
        if isinstance(value, list):
            return {k for v in value for k in keys(v)}
        return set()

    assert {"createdAt", "toolCalls", "callId", "isError"} <= keys(shown)
    assert not [k for k in keys(shown) if "_" in k]
    call = shown["messages"][1]["toolCalls"][0]
    assert call["arguments"] == {"path": "notes.txt"}


def test_session_ids_are_whole_and_take_unique_prefixes(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    from raven.sessions import SqliteStore

    store = SqliteStore(home / "data" / "raven.db")
    for sid in ("ses_aaaa1111", "ses_aaaa2222", "ses_bbbb3333"):
        store.create(str(tmp_path), face="test", model="echo", session_id=sid)
    store.close()
    listed = raven("sessions", "list", env={**env, "COLUMNS": "40"})
    assert all(sid in listed.stdout for sid in ("ses_aaaa1111", "ses_bbbb3333"))
    shown = raven("sessions", "show", "bbbb", "--json", env=env)
    assert json.loads(shown.stdout)["id"] == "ses_bbbb3333"
    ambiguous = raven("sessions", "show", "ses_aaaa", env=env)
    assert ambiguous.returncode == 2
    assert "ses_aaaa1111" in ambiguous.stderr and "ses_aaaa2222" in ambiguous.stderr
    turn = raven("run", "--model", "echo", "-s", "aaaa2", "continued", env=env)
    assert turn.returncode == 0 and "session ses_aaaa2222" in turn.stderr
    deleted = raven("sessions", "delete", "ses_bbbb", env=env)
    assert deleted.returncode == 0 and "ses_bbbb3333" in deleted.stdout
    missing = raven("sessions", "delete", "zzzz", env=env)
    assert missing.returncode == 1 and "no session 'zzzz'" in missing.stderr
    here = raven("sessions", "list", "--cwd", ".", "--json", env=env, cwd=tmp_path)
    assert {s["id"] for s in json.loads(here.stdout)} == {"ses_aaaa1111", "ses_aaaa2222"}


def test_config_show_effective_names_the_model_in_force(env: dict[str, str], home: Path) -> None:
    plain = raven("config", "show", env={**env, "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstu"})
    assert json.loads(plain.stdout) == {}
    shown = raven(
        "config", "show", "--effective", env={**env, "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstu"}
    )
    data = json.loads(shown.stdout)
    assert data["defaultModel"] == "gpt-4.1-mini"
    assert data["models"] == [{"id": "gpt-4.1-mini", "provider": "openai"}]
    assert data["limits"]["maxTurnSteps"] == 50 and data["a2a"]["server"]["path"] == "/a2a"
    write_config(home, {"a2a": {"server": {"token": "tok-abcdefghijkl"}}, "defaultModel": "echo"})
    secret = json.loads(raven("config", "show", "--effective", env=env).stdout)
    assert secret["a2a"]["server"]["token"] == "***" and secret["defaultModel"] == "echo"


def test_run_names_the_model_beside_the_session(env: dict[str, str]) -> None:
    result = raven("run", "--model", "echo", "hi", env=env)
    assert "· model echo" in result.stderr


def test_one_line_per_event_and_errors_once(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    step = {"thought": "I should look", "toolCalls": [{"name": "list_dir", "arguments": {}}]}
    (home / "script.json").write_text(json.dumps([step, {"text": "ok"}]))
    write_config(
        home,
        {
            "models": [
                {"id": "s", "provider": "scripted", "script": "script.json"},
                {"id": "local", "provider": "openai", "baseUrl": model_server.url + "/v1"},
            ]
        },
    )
    looked = raven("run", "--model", "s", "look", env=env, cwd=tmp_path)
    assert "I should look\n→ List ." in looked.stderr
    assert "thinking" not in looked.stderr  # no spinner without a terminal
    message = "the request is invalid because " + "of many reasons " * 12
    model_server.queue(Reply(status=400, body=json.dumps({"error": {"message": message}})))
    failed = raven("run", "--model", "local", "hi", env={**env, "COLUMNS": "80"})
    assert failed.returncode == 1
    assert failed.stderr.count("the request is invalid") == 1
    (line,) = [x for x in failed.stderr.splitlines() if "the request is invalid" in x]
    assert message.strip()[:200] in line


def test_a_model_server_that_is_down_is_one_line_after_the_retries(
    env: dict[str, str], home: Path
) -> None:
    from tests.ports import free_port

    gone = f"http://127.0.0.1:{free_port()}/v1"
    write_config(home, {"models": [{"id": "gone", "provider": "openai", "baseUrl": gone}]})
    down = raven("run", "hi", env=env)
    assert down.returncode == 1
    lines = down.stderr.strip().splitlines()
    assert [x for x in lines if "cannot connect" in x] == lines[:1], lines
    assert "WARNING" not in down.stderr and "retrying" not in down.stderr
    assert (home / "logs" / "cli.log").read_text().count("connect failed, retrying") == 3


def test_system_sets_the_system_prompt_and_s_says_what_it_is(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    write_config(
        home,
        {"models": [{"id": "local", "provider": "openai", "baseUrl": model_server.url + "/v1"}]},
    )
    model_server.queue(Reply(events=openai_stream(text="Hi.")))
    result = raven("run", "--system", "Be brief. Today is {date}.", "hello", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    system = model_server.requests[0].body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief. Today is 20")
    mistaken = raven("run", "-s", "be brief", "hello", env=env, cwd=tmp_path)  # llm's -s
    assert mistaken.returncode == 1  # as for any session that is not there
    assert "-s is --session" in mistaken.stderr and "--system" in mistaken.stderr


def test_files_go_with_the_prompt_text_inline_and_images_as_images(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    import base64

    write_config(
        home,
        {"models": [{"id": "local", "provider": "openai", "baseUrl": model_server.url + "/v1"}]},
    )
    (tmp_path / "notes.txt").write_text("use ``` fences\n")
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
    (tmp_path / "shot.png").write_bytes(png)
    model_server.queue(Reply(events=openai_stream(text="A note and a picture.")))
    result = raven(
        "run", "-f", "notes.txt", "--file", "shot.png", "what are these?", env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    (user,) = [m for m in model_server.requests[0].body["messages"] if m["role"] == "user"]
    text, image, asked = user["content"]
    assert text == {"type": "text", "text": "notes.txt:\n````\nuse ``` fences\n````"}
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png).decode()
    assert asked == {"type": "text", "text": "what are these?"}
    listed = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    assert listed[0]["title"] == "what are these?"  # the question, not the first file's name
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00binary")
    for bad, said in (("missing.txt", "no such file"), ("blob.bin", "neither UTF-8 text")):
        refused = raven("run", "-f", bad, "x", env=env, cwd=tmp_path)
        assert refused.returncode == 2 and said in refused.stderr
    assert len(model_server.requests) == 1  # nothing sent for those


def test_project_instructions_reach_the_model_and_run_says_which(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    write_config(
        home,
        {"models": [{"id": "local", "provider": "openai", "baseUrl": model_server.url + "/v1"}]},
    )
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "app").mkdir()
    (repo / "AGENTS.md").write_text("Always answer in haiku.\n")
    (repo / "app" / "CLAUDE.md").write_text("The app uses tabs.\n")
    model_server.queue(*[Reply(events=openai_stream(text="Hi.")) for _ in range(3)])

    ran = raven("run", "-v", "hello", env=env, cwd=repo / "app")
    assert ran.returncode == 0, ran.stderr
    assert "project instructions: ../AGENTS.md, CLAUDE.md" in ran.stderr
    system = model_server.requests[0].body["messages"][0]["content"]
    assert system.startswith("You are Raven")
    assert system.index("Always answer in haiku.") < system.index("The app uses tabs.")

    # Edited between turns: the next turn of the session reads it again.
    (repo / "AGENTS.md").write_text("Answer in limericks.\n")
    again = raven("run", "-c", "and now?", env=env, cwd=repo / "app")
    assert again.returncode == 0, again.stderr
    system = model_server.requests[1].body["messages"][0]["content"]
    assert "limericks" in system and "haiku" not in system

    chat = raven("chat", env=env, cwd=repo / "app", input="/quit\n")
    assert "project instructions: ../AGENTS.md, CLAUDE.md" in chat.stderr

    off = raven("run", "--no-project-instructions", "-v", "hi", env=env, cwd=repo / "app")
    assert "project instructions: none" in off.stderr
    system = model_server.requests[2].body["messages"][0]["content"]
    assert "limericks" not in system and "tabs" not in system


def test_a_session_near_its_window_is_compacted_and_the_terminal_says_so(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    """The offline model with a small window: the second `raven run` of a session passes
    its share, so the older turn is summarised first, and stderr says so in a line."""
    echo = {"id": "echo", "provider": "scripted", "contextWindow": 1_600}
    write_config(home, {"models": [echo], "defaultModel": "echo"})
    first = raven("run", "alpha " * 300, env=env, cwd=tmp_path)
    assert first.returncode == 0 and "compacted" not in first.stderr
    second = raven("run", "--continue", "beta " * 100, env=env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "compacted: the model now sees a summary of the earlier conversation" in second.stderr
    assert second.stdout.strip() == ("beta " * 100).strip()  # the answer after it
    (session_id,) = set(re.findall(r"ses_[0-9a-f]+", raven("sessions", "list", env=env).stdout))
    shown = raven("sessions", "show", session_id, env=env, cwd=tmp_path)
    assert "alpha alpha" in shown.stdout and "compacted" in shown.stdout

"""The habits people bring from `llm`, Claude Code and goose, through `raven` as a subprocess."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import jsonschema

from tests.conftest import RAVEN, raven, write_config
from tests.e2e.test_chat import Terminal
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "events.schema.json").read_text())


def test_continue_picks_the_latest_session_of_this_directory(
    env: dict[str, str], tmp_path: Path
) -> None:
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    first = raven("run", "--model", "echo", "first here", env=env, cwd=here)
    raven("run", "--model", "echo", "somewhere else", env=env, cwd=elsewhere)
    again = raven("run", "--model", "echo", "-c", "and again", env=env, cwd=here)
    assert again.returncode == 0, again.stderr
    session = first.stderr.split("session ")[1].split()[0]
    assert f"session {session}" in again.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = raven("run", "--model", "echo", "--continue", "x", env=env, cwd=empty)
    assert nothing.returncode == 2 and "no session yet" in nothing.stderr


def test_piped_text_comes_first_in_a_fenced_block(env: dict[str, str]) -> None:
    result = raven("run", "--model", "echo", "what failed?", env=env, input="ERROR disk full\n")
    assert result.stdout == "```\nERROR disk full\n```\n\nwhat failed?\n"
    listed = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    assert [s["title"] for s in listed] == ["what failed?"]  # the question, not the fence
    huge = raven("run", "--model", "echo", "x", env=env, input="y" * (1024 * 1024 + 1))
    assert huge.returncode == 2 and "more than 1048576 bytes" in huge.stderr


def test_output_json_is_one_object_and_jsonl_follows_the_documented_schema(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    steps = [
        {
            "thought": "look first",
            "toolCalls": [{"name": "read_file", "arguments": {"path": "a.txt"}}],
        },
        {"text": "It says alpha."},
    ]
    (home / "script.json").write_text(json.dumps(steps * 2))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    single = raven("run", "read a.txt", "--output", "json", env=env, cwd=tmp_path)
    assert single.returncode == 0, single.stderr
    body = json.loads(single.stdout)
    assert body["answer"] == "It says alpha." and body["stopReason"] == "end_turn"
    assert body["model"] == "s" and body["sessionId"].startswith("ses_")
    assert body["toolCalls"] == [
        {
            "id": body["toolCalls"][0]["id"],
            "tool": "read_file",
            "title": "Read a.txt",
            "status": "completed",
        }
    ]
    stream = raven("run", "read a.txt", "-o", "jsonl", env=env, cwd=tmp_path)
    events = [json.loads(line) for line in stream.stdout.splitlines()]
    for event in events:
        jsonschema.validate(event, SCHEMA)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["TitleChanged", "AgentThought"] and kinds[-1] == "TurnEnded"
    assert {"ToolCallStarted", "ToolCallUpdated", "AgentText", "UsageUpdated"} <= set(kinds)
    assert "session ses_" in stream.stderr and "session" not in stream.stdout


def test_raven_models_says_which_is_the_default_and_why(env: dict[str, str], home: Path) -> None:
    implicit = raven("models", "--json", env={**env, "OPENAI_API_KEY": "sk-x"})
    rows = {r["id"]: r for r in json.loads(implicit.stdout)}
    assert (
        rows["gpt-4.1-mini"]["default"] and rows["gpt-4.1-mini"]["why"] == "OPENAI_API_KEY is set"
    )
    assert rows["gpt-4.1-mini"]["keySet"] and "echo" in rows
    write_config(
        home,
        {
            "models": [
                {"id": "local", "provider": "openai", "baseUrl": "http://127.0.0.1:8080/v1"},
                {"id": "claude", "provider": "anthropic", "apiKeyEnv": "MY_CLAUDE_KEY"},
            ],
            "defaultModel": "claude",
        },
    )
    listed = {r["id"]: r for r in json.loads(raven("models", "--json", env=env).stdout)}
    assert listed["claude"]["default"] and listed["claude"]["why"] == "defaultModel in the config"
    assert listed["claude"]["keyEnv"] == "MY_CLAUDE_KEY" and not listed["claude"]["keySet"]
    assert listed["local"]["baseUrl"] == "http://127.0.0.1:8080/v1"
    assert listed["local"]["keyEnv"] is None  # no vendor key goes to a server of your own
    table = raven("models", env={**env, "COLUMNS": "160"})
    assert "MY_CLAUDE_KEY (not set)" in table.stdout and "default: claude" in table.stdout


def test_chat_resume_picks_from_recent_sessions(env: dict[str, str], tmp_path: Path) -> None:
    raven("run", "--model", "echo", "older tulips", env=env, cwd=tmp_path)
    raven("run", "--model", "echo", "newest daisies", env=env, cwd=tmp_path)
    term = Terminal(
        [*RAVEN, "chat", "--model", "echo", "--resume"], {**env, "TERM": "xterm"}, tmp_path
    )
    try:
        term.expect("resume which?")
        term.expect("older tulips")
        assert term.screen.index("newest daisies") < term.screen.index("older tulips")
        term.type("\x1b[B")  # arrow down to the older one
        term.type("\r")
        term.expect("user older tulips")
        term.prompt()
        term.mark()
        term.type("/resume\n")
        term.expect("resume which?")
        term.type("\r")  # typed ahead of the list: the newest, where the mark starts
        term.expect("user newest daisies")
        term.type("/quit\n")
        assert term.proc.wait(10) == 0
    finally:
        term.close()
    piped = raven("chat", "--model", "echo", "--resume", env=env, cwd=tmp_path, input="2\n/quit\n")
    assert " 1. " in piped.stderr and "older tulips" in piped.stderr
    assert "session ses_" in piped.stderr


def test_sessions_search_and_export(env: dict[str, str], tmp_path: Path) -> None:
    raven(
        "run", "--model", "echo", "the api_key=abcd1234efgh is for daffodils", env=env, cwd=tmp_path
    )
    found = json.loads(raven("sessions", "search", "daffodils", "--json", env=env).stdout)
    assert len(found) == 1 and "[daffodils]" in found[0]["snippet"]
    assert "abcd1234efgh" not in json.dumps(found)
    session = found[0]["id"]
    markdown = raven("sessions", "export", session[:10], env=env).stdout
    assert markdown.startswith("# ") and "## You" in markdown and "## Raven" in markdown
    assert "daffodils" in markdown and "abcd1234efgh" not in markdown
    exported = json.loads(raven("sessions", "export", session, "--format", "json", env=env).stdout)
    assert [m["role"] for m in exported["messages"]] == ["user", "assistant"]
    assert "abcd1234efgh" not in json.dumps(exported)


def test_shell_completion_knows_sessions_models_and_agents(env: dict[str, str], home: Path) -> None:
    write_config(
        home,
        {
            "models": [{"id": "local-llama", "provider": "openai", "baseUrl": "http://x/v1"}],
            "modes": [{"id": "careful", "name": "Careful"}],
            "agents": [{"name": "helper", "command": "true"}],
        },
    )
    run = raven("run", "--model", "echo", "hi", env=env)
    session = run.stderr.split("session ")[1].split()[0]

    def complete(words: str) -> list[str]:
        cword = str(len(words.split()) - (0 if words.endswith(" ") else 1))
        shell = {
            **env,
            "_RAVEN_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": cword,
        }
        return raven(env=shell).stdout.split()

    assert complete("raven sessions show ses_") == [session]
    assert complete("raven run --model loc") == ["local-llama"]
    assert complete("raven chat --mode ") == ["careful"]
    assert complete("raven agents run h") == ["helper"]
    # Typer reads the shell from the argument only when told not to detect the parent's.
    shown = {**env, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    script = raven("--show-completion", "bash", env=shown)
    assert script.returncode == 0 and "_raven_completion" in script.stdout


def test_show_and_export_mask_secrets_inside_tool_calls(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    command = "printf 'ok\\n'\npassword=hunter2xyz\n\ttoken=ghtokvalue1"
    key = "ghp_" + "k" * 30
    (home / "script.json").write_text(
        json.dumps(
            [
                {"toolCalls": [{"name": "run_command", "arguments": {"command": command}}]},
                {"text": f"done with {key}"},
            ]
        )
    )
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    ran = raven("run", "--model", "s", "--yes", "go", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    session = raven("sessions", "list", "--json", env=env)
    sid = json.loads(session.stdout)[0]["id"]
    outputs = {
        "show": raven("sessions", "show", sid, env=env).stdout,
        "show --json": raven("sessions", "show", sid, "--json", env=env).stdout,
        "export": raven("sessions", "export", sid, env=env).stdout,
        "export json": raven("sessions", "export", sid, "--format", "json", env=env).stdout,
    }
    for name, shown in outputs.items():
        assert "run_command" in shown or "printf" in shown, name
        for secret in ("hunter2xyz", "ghtokvalue1", key):
            assert secret not in shown, (name, secret)


def test_a_pipe_closed_early_ends_raven_quietly(env: dict[str, str], tmp_path: Path) -> None:
    import subprocess

    words = "word " * 40_000  # the echo model says it back: more than a pipe holds
    proc = subprocess.Popen(
        [*RAVEN, "run", "--model", "echo"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(words.encode())
    proc.stdin.close()
    assert proc.stdout.read(20).startswith(b"word")  # `| head -c 20`, then the pipe closes
    proc.stdout.close()
    assert proc.wait(30) == 141  # as a program killed by SIGPIPE, without its noise
    said = proc.stderr.read().decode()
    proc.stderr.close()
    assert "Traceback" not in said and "BrokenPipe" not in said and "Exception" not in said


def test_the_spinner_runs_while_the_first_turn_of_a_session_waits(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    (home / "slow.json").write_text(json.dumps([{"text": "late answer", "waitFor": "gate"}]))
    write_config(home, {"models": [{"id": "slow", "provider": "scripted", "script": "slow.json"}]})
    term = Terminal([*RAVEN, "run", "hello"], {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.expect("thinking · 1s")  # still spinning after the title change, a second in
        (home / "gate").touch()  # the model answers only now
        term.expect("late answer")
        assert term.proc.wait(30) == 0
    finally:
        term.close()


def test_a_local_model_is_added_used_and_removed_without_editing_json(
    env: dict[str, str], home: Path, model_server: FakeModelServer
) -> None:
    base = model_server.url + "/v1"
    added = raven("models", "add", "local", "--base-url", base, "--model", "qwen3:8b", env=env)
    assert added.returncode == 0 and "added local (the default)" in added.stdout
    config = home / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {
        "models": [{"id": "local", "provider": "openai", "model": "qwen3:8b", "baseUrl": base}],
        "defaultModel": "local",
    }
    model_server.queue(Reply(events=openai_stream("hello from qwen")))
    answered = raven("run", "hi", env=env)  # the new default, no --model
    assert answered.returncode == 0 and "hello from qwen" in answered.stdout
    assert model_server.requests[-1].body["model"] == "qwen3:8b"

    again = raven("models", "add", "local", "--model", "x", env=env)
    assert again.returncode == 2 and "raven models remove local" in again.stderr
    cloud = ["--provider", "anthropic", "--model", "claude-sonnet-4-5", "--key-env", "MY_KEY"]
    assert raven("models", "add", "claude", *cloud, env=env).returncode == 0
    assert json.loads(config.read_text())["defaultModel"] == "local"  # kept
    assert raven("models", "default", "claude", env=env).returncode == 0
    rows = {r["id"]: r for r in json.loads(raven("models", "--json", env=env).stdout)}
    assert rows["claude"]["default"] and rows["claude"]["keyEnv"] == "MY_KEY"
    unknown = raven("models", "default", "gpt-9", env=env)
    assert unknown.returncode == 2 and "no model 'gpt-9'" in unknown.stderr
    assert "local, claude, echo" in unknown.stderr
    removed = raven("models", "remove", "claude", env=env)
    assert removed.returncode == 0 and "there is no default model now" in removed.stdout
    body = json.loads(config.read_text())
    assert [m["id"] for m in body["models"]] == ["local"] and "defaultModel" not in body
    bad = raven("models", "add", "x", "--provider", "ollama", "--model", "m", env=env)
    assert bad.returncode == 2 and "use openai or anthropic" in bad.stderr


def test_usage_adds_up_the_model_calls_as_the_server_counted_them(
    env: dict[str, str], home: Path, tmp_path: Path, model_server: FakeModelServer
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    write_config(
        home,
        {"models": [{"id": "m", "provider": "openai", "baseUrl": model_server.url + "/v1"}]},
    )
    model_server.queue(
        Reply(
            events=openai_stream(
                tool_calls=[("c1", "read_file", '{"path": "a.txt"}')], usage=(120, 7)
            )
        ),
        Reply(events=openai_stream("It says alpha.", usage=(150, 4))),
    )
    ran = raven("run", "-u", "-o", "json", "read a.txt", env=env, cwd=tmp_path)
    assert ran.returncode == 0 and json.loads(ran.stdout)["answer"].strip() == "It says alpha."
    assert "Token usage: 270 input, 11 output over 2 model calls" in ran.stderr
    usage = json.loads(ran.stdout)["usage"]  # the same totals, for scripts
    assert (usage["inputTokens"], usage["outputTokens"], usage["estimated"]) == (270, 11, False)
    assert usage["models"]["m"] == {
        "inputTokens": 270,
        "outputTokens": 11,
        "calls": 2,
        "estimatedCalls": 0,
    }
    model_server.queue(Reply(events=openai_stream("no counts", usage=None)))
    estimated = raven("run", "--usage", "hi", env=env, cwd=tmp_path)
    assert "(estimated: the server reported no usage)" in estimated.stderr
    quiet = raven("run", "--model", "echo", "hi", env=env, cwd=tmp_path)
    assert "Token usage" not in quiet.stderr  # only on request
    offline = raven("run", "--model", "echo", "-u", "-o", "json", "hi", env=env, cwd=tmp_path)
    assert "Token usage: about " in offline.stderr  # the offline model counts nothing
    assert json.loads(offline.stdout)["usage"]["estimated"] is True

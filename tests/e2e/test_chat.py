"""`raven chat` driven through a pseudo-terminal, as a person at a keyboard would."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RAVEN, raven, write_config
from tests.e2e.terminal import ANSI, Terminal


@pytest.fixture
def chat(env: dict[str, str], home: Path, tmp_path: Path) -> Iterator[Terminal]:
    work = tmp_path / "work"
    work.mkdir()
    (home / "script.json").write_text(
        json.dumps(
            [
                {"text": "Hi there, **friend**."},
                {
                    "toolCalls": [
                        {
                            "name": "write_file",
                            "arguments": {"path": "note.txt", "content": "from chat"},
                        }
                    ]
                },
                {"text": "The file is written."},
                {"toolCalls": [{"name": "run_command", "arguments": {"command": "sleep 60"}}]},
                {"text": "never shown"},
            ]
        )
    )
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    term = Terminal([*RAVEN, "chat"], {**env, "TERM": "xterm", "COLUMNS": "100"}, work)
    try:
        yield term
    finally:
        term.close()


def test_chat_streams_answers_asks_inline_and_survives_ctrl_c(
    chat: Terminal, tmp_path: Path
) -> None:
    chat.prompt()
    chat.type("hello\n")
    chat.expect("Hi there, friend.")
    chat.prompt()

    chat.mark()
    chat.type("write a note\n")
    chat.expect("new file")  # what the call will do, before the question
    chat.expect("+from chat")
    chat.expect("Allow Write note.txt?")
    chat.type("maybe\n")  # not an answer: the keys that are, and the question again
    hint = "answer y (yes, this once), a (always), n (no), r (never)"
    chat.expect(hint)
    chat.expect("Allow Write note.txt?", after=hint)
    chat.type("y\n")
    chat.expect("The file is written.")
    assert (tmp_path / "work/note.txt").read_text() == "from chat"

    chat.mark()
    chat.type("now sleep\n")
    chat.expect("$ sleep 60")
    chat.expect("Allow Run `sleep 60`?")
    chat.mark()
    chat.type("y\n")
    chat.expect("running Run `sleep 60`")
    chat.type("\x03")
    chat.expect("cancelled", timeout=5)
    assert "^Ccancelled" not in ANSI.sub("", chat.screen)
    chat.prompt()
    assert chat.proc.poll() is None

    chat.mark()
    chat.type("still there?\n")
    chat.expect("still there?")
    chat.type("/quit\n")
    assert chat.proc.wait(10) == 0


def test_chat_slash_commands(chat: Terminal, env: dict[str, str]) -> None:
    chat.prompt()
    chat.type("/help\n")
    chat.expect("/resume [ID]")
    chat.type("/model nope\n")
    chat.expect("unknown model 'nope'")
    chat.mark()
    chat.type("/model\n")
    chat.expect("● s")
    chat.expect("  echo")
    chat.expect("/model ID switches")
    chat.type("/mode ask\n")
    chat.expect("none are declared")
    chat.type("/sessions\n")
    chat.expect("no sessions yet")  # nothing sent yet, so nothing stored
    chat.prompt(after="no sessions yet")
    chat.type("\x04")
    assert chat.proc.wait(10) == 0
    assert json.loads(raven("sessions", "list", "--json", env=env).stdout) == []


def test_chat_resumes_a_stored_session_and_starts_new_ones(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    first = raven("run", "--model", "echo", "the tulips are red", env=env, cwd=tmp_path)
    session_id = first.stderr.split("session ")[1].split()[0]
    term = Terminal([*RAVEN, "chat", "--model", "echo"], {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.prompt()
        term.type(f"/resume {session_id}\n")
        term.expect("the tulips are red")
        term.expect(f"session {session_id}")
        term.mark()
        term.type("/resume ses_nope\n")
        term.expect("no session 'ses_nope'")
        term.mark()
        term.type("/new\n")
        term.expect("session ses_")
        assert session_id not in term.screen
        term.type("/quit\n")
        assert term.proc.wait(10) == 0
    finally:
        term.close()


def test_a_spinner_shows_while_the_model_thinks_and_a_tool_runs(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    steps = [
        {"toolCalls": [{"name": "run_command", "arguments": {"command": "sleep 1.5"}}]},
        {"text": "all done", "waitFor": "gate"},
    ]
    (home / "script.json").write_text(json.dumps(steps))
    write_config(home, {"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    term = Terminal([*RAVEN, "run", "--yes", "go"], {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.expect("running Run `sleep 1.5` · ")
        term.expect("thinking · 1s")
        (home / "gate").touch()  # the model answers only now
        term.expect("all done")
        assert term.proc.wait(10) == 0
    finally:
        term.close()


def test_chat_sends_attached_files_with_the_first_message_only(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("remember the tulips\n")
    args = [*RAVEN, "chat", "--model", "echo", "-f", "notes.txt"]
    term = Terminal(args, {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.expect("1 attached file(s) go with your first message")
        term.prompt()
        term.type("first\n")
        term.expect("remember the tulips")  # the echo model says back what it was sent
        term.prompt()
        term.mark()
        term.type("second\n")
        term.expect("second")
        term.prompt()
        assert "tulips" not in term.screen
        term.type("/quit\n")
        assert term.proc.wait(10) == 0
    finally:
        term.close()


def test_the_prompt_recalls_pastes_completes_attaches_and_runs(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("remember the tulips\n")
    args = [*RAVEN, "chat", "--model", "echo"]
    term = Terminal(args, {**env, "TERM": "xterm"}, tmp_path)
    try:
        term.prompt()
        # Tab completes a /command.
        term.mark()
        term.type("/he\t")
        term.expect("/help")
        term.type("\r")
        term.expect("start a new session")
        term.prompt()
        # A pasted block of three lines is one message, not three.
        term.type("\x1b[200~line one\nline two\nline three\x1b[201~\r")
        term.prompt()
        # @ and Tab complete a file's name, and the file goes with the message.
        term.mark()
        term.type("what is in @no\t")
        term.expect("@notes.txt")  # completed on the line, then sent
        term.type("\r")
        term.expect("attached notes.txt")
        term.expect("remember the tulips")  # the echo model says back what it was sent
        term.prompt()
        # !command runs here; its output goes with the next message.
        term.type("!echo shell-$((40 + 2))\r")
        term.expect("its output goes with your next message")
        term.expect("shell-42")
        term.prompt()
        term.type("and this?\r")
        term.prompt()
        term.type("/quit\r")
        assert term.proc.wait(10) == 0
    finally:
        term.close()
    (session,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    shown = json.loads(raven("sessions", "show", session["id"], "--json", env=env).stdout)
    said = [
        "\n".join(p["text"] for p in m["parts"]) for m in shown["messages"] if m["role"] == "user"
    ]
    assert said[0] == "line one\nline two\nline three"
    assert said[1].startswith("notes.txt:\n```\nremember the tulips") and "@notes.txt" in said[1]
    assert "I ran `echo shell-$((40 + 2))`:\n```\nshell-42" in said[2] and "and this?" in said[2]

    # The history is the project's, kept between runs and private.
    (history,) = (home / "data" / "chat-history").iterdir()
    assert history.stat().st_mode & 0o777 == 0o600
    again = Terminal(args, {**env, "TERM": "xterm"}, tmp_path)
    try:
        again.prompt()
        again.mark()
        again.type("\x1b[A")  # Up: what was typed last in the last run
        again.expect("/quit")  # the history is loaded
        again.type("\x1b[A\r")  # the message before it, sent again
        again.prompt()
        again.type("\x04")
        assert again.proc.wait(10) == 0
    finally:
        again.close()
    newest = json.loads(raven("sessions", "list", "--json", env=env).stdout)[0]
    assert newest["id"] != session["id"] and newest["title"] == "and this?"


def test_a_message_between_triple_quotes_keeps_its_lines(
    env: dict[str, str], tmp_path: Path
) -> None:
    typed = '"""first line\nsecond line\n  indented"""\n"""\n"""\none line\n/quit\n'
    done = raven("chat", "--model", "echo", env=env, cwd=tmp_path, input=typed)
    assert done.returncode == 0, done.stderr
    (session,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    shown = json.loads(raven("sessions", "show", session["id"], "--json", env=env).stdout)
    said = [m["parts"][0]["text"] for m in shown["messages"] if m["role"] == "user"]
    assert said == ["first line\nsecond line\n  indented", "one line"]  # the empty one is none


def test_compact_summarises_the_conversation_but_its_newest_turn(
    env: dict[str, str], tmp_path: Path
) -> None:
    """`/compact` asks the model for a summary (the offline model answers the request with
    its own words), says so, and the next turn's model sees the summary and the newest
    turn only; the stored transcript keeps every message."""
    typed = "plums\nmore plums\n/compact\n/compact\nand now\n/quit\n"
    done = raven("chat", "--model", "echo", env=env, cwd=tmp_path, input=typed)
    assert done.returncode == 0, done.stderr
    assert "compacted: the model now sees a summary of the earlier conversation" in done.stderr
    assert "nothing older than the running turn is left to summarise" in done.stderr
    (session,) = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    shown = json.loads(raven("sessions", "show", session["id"], "--json", env=env).stdout)
    roles = [m["role"] for m in shown["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "compaction", "user", "assistant"]
    assert shown["messages"][4]["keptFrom"] == 2


def test_chat_says_which_sandbox_its_commands_run_in(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    modes = [
        {"id": "open", "name": "Open"},
        {"id": "shut", "name": "Shut", "sandbox": "strict"},
    ]
    models = [{"id": "s", "provider": "scripted"}]
    write_config(home, {"models": models, "modes": modes, "sandbox": "workspace"})
    term = Terminal([*RAVEN, "chat"], {**env, "TERM": "xterm", "COLUMNS": "100"}, tmp_path)
    try:
        term.expect("sandbox workspace: ")  # enforced, or said not to be
        term.prompt()
        term.type("/mode shut\n")
        term.expect("sandbox strict: ")
        term.prompt(after="sandbox strict: ")
        term.type("\x04")
        assert term.proc.wait(10) == 0
    finally:
        term.close()

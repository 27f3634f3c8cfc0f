"""`raven agents run` under `ask` and a rule's `escalate`: the person at the terminal decides,
seeing what the child will run; with no terminal, an escalated request is rejected."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.children import scripted_child
from tests.conftest import RAVEN, raven, write_config
from tests.e2e.terminal import Terminal

SDK_AGENT = Path(__file__).parents[1] / "acp_client" / "sdk_agent.py"
CALLS = [
    {"title": "Run make", "kind": "execute", "rawInput": {"command": "make deploy"}},
    {"title": "Run git", "kind": "execute", "rawInput": {"command": "git status"}},
    {"title": "Read notes", "kind": "read", "rawInput": {"command": "rm -rf ~"}},
]


def configure(home: Path) -> None:
    helper = {
        "name": "helper",
        "command": sys.executable,
        "args": [str(SDK_AGENT), "requests", json.dumps(CALLS)],
        "permissions": "ask",
        "rules": [{"kind": ["execute"], "commands": ["git"], "action": "allow"}],
    }
    write_config(home, {"defaultModel": "echo", "agents": [helper]})


def test_an_escalated_request_is_asked_on_the_terminal(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home)
    term = Terminal([*RAVEN, "agents", "run", "helper", "go"], env, tmp_path)
    try:
        term.expect("Allow helper: Run make?")
        assert "make deploy" in term.screen  # what will run, beside the question
        term.type("y\n")
        term.expect("Allow helper: Read notes?")  # a command labelled "read": asked too
        assert "rm -rf ~" in term.screen
        term.type("n\n")
        term.expect("decision: reject once: Read notes (by you; judged execute, labelled read)")
        assert "opt-allow_once, opt-allow_once, opt-reject_once" in term.screen
        assert "decision: allow once: Run make (by you)" in term.screen
        assert "decision: allow once: Run git (by rule 1)" in term.screen  # not asked
        assert term.proc.wait(15) == 0
    finally:
        term.close()


def test_without_a_terminal_an_escalated_request_is_rejected(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home)
    ran = raven("agents", "run", "helper", "go", "--json", env=env, cwd=tmp_path)
    out = json.loads(ran.stdout)
    assert out["answer"] == "opt-reject_once, opt-allow_once, opt-reject_once"
    assert out["decisions"][0] == "reject once: Run make (no answer: rejected)"


def test_a_childs_usage_adds_up_in_the_parents_totals(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    helper = scripted_child(tmp_path / "child", [{"text": "Kid did it."}])
    delegate = {"name": "delegate", "arguments": {"agent": "helper", "task": "do it"}}
    (home / "script.json").write_text(
        json.dumps([{"toolCalls": [delegate]}, {"text": "The helper did it."}])
    )
    model = {
        "id": "parent",
        "provider": "scripted",
        "script": str(home / "script.json"),
        "prices": {"input": 2.0, "output": 8.0},
    }
    write_config(home, {"models": [model], "defaultModel": "parent", "agents": [helper]})
    ran = raven("run", "-u", "--yes", "let the helper do it", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    line = next(s for s in ran.stderr.splitlines() if s.startswith("Token usage: "))
    # The parent's two model calls (the scripted model's counts are Raven's estimate, and
    # said to be), then the child's own turn, as the child reported it.
    assert re.fullmatch(
        r"Token usage: about [\d,]+ input, [\d,]+ output over 2 model calls; "
        r"helper: [\d,]+ input, 3 output; \$0\.\d{4} \(partly estimated: .*\)",
        line,
    ), line
    sessions = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    (listed,) = [s for s in sessions if s["face"] == "cli"]  # the child's is a sub-agent's
    shown = json.loads(raven("sessions", "show", listed["id"], "--json", env=env).stdout)
    usage = shown["usage"]
    assert usage["models"]["parent"]["calls"] == 2 and usage["costUsd"] > 0
    assert usage["agents"]["helper"]["outputTokens"] == 3  # "Kid did it." in three words
    assert usage["agents"]["helper"]["inputTokens"] > 0
    text = raven("sessions", "show", listed["id"], env=env).stdout
    assert "helper used " in text and line in text

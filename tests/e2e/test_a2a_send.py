"""`a2a_send` and `raven a2a send` against `raven a2a serve`, two Ravens talking A2A."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.a2a_client.echo_peer import echo_peer
from tests.conftest import raven, write_config
from tests.e2e.a2a_server import TOKEN, A2AServer, configure, start
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream


@pytest.fixture
def peer(env: dict[str, str], tmp_path: Path) -> Iterator[A2AServer]:
    home = tmp_path / "peer-home"
    home.mkdir()
    configure(
        home,
        [
            {"toolCalls": [{"name": "ask_user", "arguments": {"question": "Which city?"}}]},
            {"text": "Sunny in Lisbon."},
        ],
    )
    server = start({**env, "RAVEN_HOME": str(home)})
    try:
        yield server
    finally:
        server.stop()


def client_config(
    home: Path, peer: A2AServer, steps: list[dict[str, Any]] | None = None, credential: str = TOKEN
) -> None:
    (home / "script.json").write_text(json.dumps(steps or []))
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "a2a": {"peers": [{"origin": peer.base, "credential": credential}]},
        },
    )


def test_raven_a2a_send_exit_codes(env: dict[str, str], home: Path, peer: A2AServer) -> None:
    client_config(home, peer)
    card = peer.base + "/.well-known/agent-card.json"
    asked = raven("a2a", "send", card, "weather?", env=env)
    assert asked.returncode == 4, asked.stderr
    assert asked.stdout.strip() == "Which city?" and "--task-id" in asked.stderr
    task_id = asked.stderr.split("--task-id ")[1].split()[0]
    answered = raven("a2a", "send", card, "Lisbon", "--task-id", task_id, env=env)
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.strip().endswith("Sunny in Lisbon.")
    raw = json.loads(raven("a2a", "send", card, "again?", "--json", env=env).stdout)
    assert raw["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_wrong_credential_is_a_clear_failure(
    env: dict[str, str], home: Path, peer: A2AServer
) -> None:
    client_config(home, peer, credential="not-the-token")
    result = raven("a2a", "send", peer.base + "/.well-known/agent-card.json", "hi", env=env)
    assert result.returncode == 1 and "HTTP 401" in result.stderr
    assert "not-the-token" not in result.stderr


def test_the_model_answers_a_peer_question_through_a2a_send(
    env: dict[str, str], home: Path, peer: A2AServer, model_server: FakeModelServer
) -> None:
    card = peer.base + "/.well-known/agent-card.json"

    def answer_with_the_task_id(body: dict[str, Any]) -> Reply:
        result = body["messages"][-1]["content"]
        task_id = re.search(r"task_id='([^']+)'", result).group(1)  # type: ignore[union-attr]
        args = json.dumps({"card_url": card, "message": "Lisbon", "task_id": task_id})
        return Reply(events=openai_stream(tool_calls=[("c2", "a2a_send", args)]))

    args = json.dumps({"card_url": card, "message": "weather?"})
    model_server.queue(
        Reply(events=openai_stream(tool_calls=[("c1", "a2a_send", args)])),
        answer_with_the_task_id,
        Reply(events=openai_stream(text="It is sunny in Lisbon.")),
    )
    write_config(
        home,
        {
            "models": [
                {
                    "id": "gpt",
                    "provider": "openai",
                    "baseUrl": model_server.url + "/v1",
                    "apiKey": "sk-test",
                }
            ],
            "a2a": {"peers": [{"origin": peer.base, "credential": TOKEN}]},
        },
    )
    result = raven("run", "--yes", "what is the weather?", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "It is sunny in Lisbon."
    tools = [m for m in model_server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "Which city?" in tools[0]["content"]
    final = [m for m in model_server.requests[2].body["messages"] if m["role"] == "tool"]
    assert final[-1]["content"].startswith("Which city?\n\nSunny in Lisbon.")
    assert TOKEN not in json.dumps([r.body for r in model_server.requests])
    assert a2a_send_spec(model_server.requests[0].body)["function"]["parameters"]["required"] == [
        "card_url",
        "message",
    ]


def a2a_send_spec(body: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in body["tools"] if t["function"]["name"] == "a2a_send")


def test_a2a_send_is_not_offered_inside_a_sub_agent(
    env: dict[str, str], home: Path, peer: A2AServer
) -> None:
    client_config(
        home,
        peer,
        [
            {
                "toolCalls": [
                    {"name": "a2a_send", "arguments": {"card_url": peer.base, "message": "x"}}
                ]
            },
            {"text": "ok"},
        ],
    )
    result = raven("run", "--yes", "try", env={**env, "RAVEN_SUBAGENT": "1"})
    assert "Unknown tool 'a2a_send'" in result.stderr


def test_a_peer_echoing_our_credential_gets_it_nowhere(env: dict[str, str], home: Path) -> None:
    secret = "peer-credential-42"
    with echo_peer() as echo:
        (home / "script.json").write_text(
            json.dumps(
                [
                    {
                        "toolCalls": [
                            {
                                "name": "a2a_send",
                                "arguments": {"card_url": echo.card_url, "message": m},
                            }
                            for m in ("text", "ids", "error")
                        ]
                    },
                    {"text": "done"},
                ]
            )
        )
        write_config(
            home,
            {
                "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
                "a2a": {"peers": [{"origin": echo.origin, "credential": secret}]},
            },
        )
        printed = [
            raven("a2a", "send", echo.card_url, kind, "--json", env=env) for kind in ("text", "ids")
        ]
        printed += [
            raven("a2a", "send", echo.card_url, kind, env=env) for kind in ("ids", "error", "401")
        ]
        turn = raven("run", "--yes", "ask the peer", env=env)
    assert turn.returncode == 0, turn.stderr
    shown = json.loads(printed[0].stdout)["result"]["task"]["status"]["message"]["parts"][0]["text"]
    assert "***" in shown
    for result in [*printed, turn]:
        assert secret not in (result.stdout + result.stderr).lower()
    stored = b"".join(p.read_bytes() for p in (home / "data").iterdir())
    assert secret.encode() not in stored.lower() and b"***" in stored


def test_sending_a_file_to_a_peer_needs_approval(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    with echo_peer() as peer:
        (tmp_path / "secret-plans.txt").write_text("plans")
        args = {"card_url": peer.card_url, "message": "text", "files": ["secret-plans.txt"]}
        (home / "script.json").write_text(
            json.dumps([{"toolCalls": [{"name": "a2a_send", "arguments": args}]}, {"text": "ok"}])
        )
        write_config(
            home,
            {
                "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
                "a2a": {"peers": [{"origin": peer.origin, "credential": "c" * 12}]},
            },
        )
        denied = raven("run", "send my plans", env=env, cwd=tmp_path)
    assert "denied" in denied.stderr and "Ask A2A peer" in denied.stderr


def test_a2a_send_sends_only_files_inside_the_working_directory(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "plans.txt").write_text("plans")
    (work / "link.txt").symlink_to(home / "config.json")
    with echo_peer() as peer:
        outside = ["../home/config.json", str(home / "config.json"), "link.txt"]
        steps = [
            {
                "toolCalls": [
                    {
                        "name": "a2a_send",
                        "arguments": {"card_url": peer.card_url, "message": "text", "files": [f]},
                    }
                ]
            }
            for f in [*outside, "plans.txt"]
        ]
        (home / "script.json").write_text(json.dumps([*steps, {"text": "ok"}]))
        write_config(
            home,
            {
                "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
                "a2a": {"peers": [{"origin": peer.origin, "credential": "c" * 12}]},
            },
        )
        ran = raven("run", "--yes", "-o", "jsonl", "send", env=env, cwd=work)
        assert ran.returncode == 0, ran.stderr
        events = [json.loads(line) for line in ran.stdout.splitlines()]
        results = [e for e in events if e["type"] == "ToolCallUpdated" and e["content"]]
        for result in results[:3]:
            assert result["status"] == "failed"
            assert "outside the working directory; nothing was sent" in result["content"]
        titles = [e["title"] for e in events if e["type"] == "ToolCallStarted"]
        assert titles[3] == f"Ask A2A peer {peer.card_url}, sending plans.txt"
        (sent,) = peer.received  # only the file inside the working directory left
        (file_part,) = [p for p in sent["params"]["message"]["parts"] if "raw" in p]
        assert file_part["filename"] == "plans.txt"


def test_speaking_http_leaves_httpx_s_own_command_line_client_unloaded(
    env: dict[str, str],
) -> None:
    """httpx imports its CLI (click, rich's syntax, pygments) whenever click is installed;
    every Raven that speaks HTTP would pay for it on each start."""
    from tests.ports import free_port

    card = f"http://127.0.0.1:{free_port()}/.well-known/agent-card.json"  # nobody listens
    result = raven("a2a", "send", card, "hi", env={**env, "PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 1 and "127.0.0.1" in result.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "httpx" in imported
    assert sorted(m for m in imported if m.split(".")[0] in ("click", "pygments")) == []

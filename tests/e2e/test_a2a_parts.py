"""Typed A2A parts in both directions: data and files reach the model, files go back, and
nothing a peer sends is dropped without a word. Real HTTP on loopback."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import raven, write_config
from tests.e2e.a2a_server import TOKEN, A2AServer, configure, start


@pytest.fixture
def serve(env: dict[str, str], home: Path) -> Iterator[Any]:
    servers: list[A2AServer] = []

    def launch(steps: list[dict[str, Any]] | None = None, **server: Any) -> A2AServer:
        configure(home, steps, cwd="work", **server)
        servers.append(start(env))
        return servers[-1]

    yield launch
    for server in servers:
        assert server.stop() == 0


def send(server: A2AServer, *parts: dict[str, Any]) -> dict[str, Any]:
    message = {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": list(parts)}
    return server.call("SendMessage", {"message": message})


def file_part(name: str, data: bytes, media_type: str = "text/plain") -> dict[str, Any]:
    return {"raw": base64.b64encode(data).decode(), "filename": name, "mediaType": media_type}


def test_a_data_part_reaches_the_model_as_fenced_json(serve: Any) -> None:
    server = serve()  # no script: the scripted model echoes what it got
    sent = {"zeta": 42, "alpha": [2, 3.5], "nested": {"b": 1, "a": 2.0}}
    data = {"data": sent, "mediaType": "application/json"}
    answer = send(server, {"text": "summarise"}, data)["result"]["task"]
    text = answer["status"]["message"]["parts"][0]["text"]
    # The JSON as sent: integers stay integers, keys keep their order.
    assert "summarise" in text and f"```json\n{json.dumps(sent, indent=2)}\n```" in text
    stored = server.call("GetTask", {"id": answer["id"]})["result"]["history"][0]["parts"][1]
    assert stored["data"] == {"zeta": 42, "alpha": [2, 3.5], "nested": {"b": 1, "a": 2}}
    assert type(stored["data"]["zeta"]) is int
    empty = send(server, {"text": "x"}, {"mediaType": "text/plain"})["error"]
    assert empty["code"] == -32602 and "parts[1] has no content" in empty["message"]
    too_big = {"data": {"blob": "x" * (65 * 1024)}}
    error = send(server, {"text": "x"}, too_big)["error"]
    assert error["code"] == -32602 and "65536" in error["message"]


def test_a_file_lands_in_the_inbox_under_a_safe_name_and_the_model_reads_it(
    serve: Any, home: Path
) -> None:
    server = serve(
        [
            {"toolCalls": [{"name": "list_dir", "arguments": {"path": "inbox", "depth": 3}}]},
            {"text": "read"},
        ]
    )
    task = send(
        server,
        {"text": "look at these"},
        file_part("../../escape.txt", b"first"),
        file_part("../../escape.txt", b"second"),
        file_part(".hidden", b"dot"),
        {"url": "https://example.com/big.bin", "mediaType": "application/octet-stream"},
    )["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    inbox = home / "work" / "inbox"
    saved = sorted(p.relative_to(inbox).parts[-1] for p in inbox.rglob("*") if p.is_file())
    assert saved == ["escape-2.txt", "escape.txt", "hidden"]
    assert not (home / "escape.txt").exists() and not (home.parent / "escape.txt").exists()
    contents = sorted(p.read_bytes() for p in inbox.rglob("*") if p.is_file())
    assert contents == [b"dot", b"first", b"second"]
    prompt = transcript_prompt(home)
    assert "read it with your file tools" in prompt
    assert "file by reference, not fetched: https://example.com/big.bin" in prompt


def test_a_very_long_file_name_or_context_id_is_shortened_not_fatal(serve: Any, home: Path) -> None:
    server = serve()
    long_name = "report-" + "n" * 300 + ".csv"
    message = {
        "messageId": "m-long",
        "role": "ROLE_USER",
        "contextId": "ctx-" + "c" * 400,
        "parts": [{"text": "keep this"}, file_part(long_name, b"a,b\n")],
    }
    task = server.call("SendMessage", {"message": message})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    (saved,) = [p for p in (home / "work" / "inbox").rglob("*") if p.is_file()]
    assert saved.read_bytes() == b"a,b\n" and saved.suffix == ".csv"
    assert saved.name.startswith("report-nnn") and len(saved.name) <= 120
    assert all(len(part) <= 120 for part in saved.relative_to(home).parts)


def transcript_prompt(home: Path) -> str:
    from raven.sessions import SqliteStore

    store = SqliteStore(home / "data" / "raven.db")
    try:
        (record,) = store.page().sessions
        return store.messages(record.id)[0].text  # type: ignore[union-attr]
    finally:
        store.close()


def test_files_over_the_cap_and_unaccepted_types_are_refused(serve: Any) -> None:
    server = serve(
        max_file_bytes=1024, max_body_bytes=64 * 1024 * 1024, file_media_types=["text/*"]
    )
    big = send(server, {"text": "x"}, file_part("big.txt", b"x" * 2048))["error"]
    assert big["code"] == -32602 and "maxFileBytes (1024 bytes)" in big["message"]
    image = send(server, {"text": "x"}, file_part("a.png", b"png", "image/png"))["error"]
    assert image["code"] == -32005 and "text/plain, application/json, text/*" in image["message"]
    many = [file_part(f"f{n}.txt", b"x") for n in range(3000)]  # a folder's worth, small
    flood = send(server, {"text": "x"}, *many)["error"]
    assert flood["code"] == -32602 and "at most 32" in flood["message"]
    assert server.call("ListTasks", {})["result"]["tasks"] == []  # nothing written, no task


def test_a_21_mib_file_gets_the_error_naming_the_default_cap(serve: Any) -> None:
    server = serve(max_body_bytes=64 * 1024 * 1024)
    payload = file_part("huge.bin", b"\0" * (21 * 1024 * 1024), "application/octet-stream")
    error = send(server, {"text": "x"}, payload)["error"]
    assert error["code"] == -32602 and str(20 * 1024 * 1024) in error["message"]


def test_attach_file_returns_a_file_artifact(serve: Any, home: Path) -> None:
    server = serve(
        [
            {
                "toolCalls": [
                    {"name": "write_file", "arguments": {"path": "r.csv", "content": "a,b\n"}}
                ]
            },
            {"toolCalls": [{"name": "attach_file", "arguments": {"path": "r.csv"}}]},
            {"toolCalls": [{"name": "attach_file", "arguments": {"path": "../config.json"}}]},
            {"text": "Here is the report."},
        ],
        approvals="auto",
    )
    task = send(server, {"text": "make a report"})["result"]["task"]
    files = [p for a in task["artifacts"] for p in a["parts"] if "raw" in p]
    assert [(f["filename"], base64.b64decode(f["raw"])) for f in files] == [("r.csv", b"a,b\n")]
    assert files[0]["mediaType"] == "text/csv"
    assert task["status"]["message"]["parts"][0]["text"] == "Here is the report."
    history = json.dumps(task.get("history", []))
    assert TOKEN not in history


def test_a2a_send_saves_files_and_data_from_a_peer_and_sends_files(
    serve: Any, env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    peer = serve(
        [
            {
                "toolCalls": [
                    {"name": "write_file", "arguments": {"path": "out.txt", "content": "peer file"}}
                ]
            },
            {"toolCalls": [{"name": "attach_file", "arguments": {"path": "out.txt"}}]},
            {"text": "Sent you a file."},
        ],
        approvals="auto",
    )
    client_home = tmp_path / "client"
    client_home.mkdir()
    write_config(
        client_home,
        {"defaultModel": "echo", "a2a": {"peers": [{"origin": peer.base, "credential": TOKEN}]}},
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("my notes")
    result = raven(
        "a2a",
        "send",
        peer.base + "/.well-known/agent-card.json",
        "take my notes",
        "--file",
        "notes.txt",
        env={**env, "RAVEN_HOME": str(client_home)},
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Sent you a file."
    saved = next((work / "a2a-inbox").rglob("out.txt"))
    assert saved.read_text() == "peer file" and "file saved:" in result.stderr
    sent = next((home / "work" / "inbox").rglob("notes.txt"))
    assert sent.read_text() == "my notes"

"""A full disk and a damaged store: Raven says which file and what to do, keeps serving,
and loses nothing it had stored.

The full disk is a real one: a small tmpfs mounted over the data folder in a mount
namespace of the test's own (`unshare`), filled up before Raven writes."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import RAVEN, raven

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}


def on_a_small_disk(
    data: Path, script: str, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`sh -c script` with a 512 KiB tmpfs mounted at `data` ($D in the script), in a user
    and mount namespace of its own, as it ran; skipped where the kernel allows no such
    namespace."""
    if (
        shutil.which("unshare") is None
        or subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
        ).returncode
    ):
        reason = "no unprivileged user and mount namespaces here (unshare)"
        if os.environ.get("RAVEN_TEST_STRICT"):
            pytest.fail(reason)
        pytest.skip(reason)
    data.mkdir(parents=True, exist_ok=True)
    mount = f'mount -t tmpfs -o size=512k tmpfs "{data}" && D="{data}" && '
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount + script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_full_disk_under_raven_run_is_said_plainly_and_loses_nothing(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    run = " ".join(RAVEN)
    words = "word " * 20_000  # a prompt the full disk has no room for
    script = (
        f'{run} run --model echo "remember the marigolds" >/dev/null && '
        'head -c 10M /dev/zero > "$D/filler" 2>/dev/null; '
        f'{run} run --model echo "{words}"; echo "exit $?"; '
        f'rm "$D/filler"; {run} sessions list --json'
    )
    done = on_a_small_disk(home / "data", script, env, tmp_path)
    said = done.stderr
    assert "Traceback" not in said and "OperationalError" not in said, said
    assert "is full" in said and str(home / "data" / "raven.db") in said, said
    assert "exit 0" not in done.stdout  # the turn that could not be kept did not succeed
    listed = json.loads(done.stdout[done.stdout.index("[") :])
    assert [s["title"] for s in listed][-1] == "remember the marigolds"  # kept


def test_a_full_disk_under_raven_acp_answers_why_and_keeps_serving(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    frames = [
        INIT,
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path)}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}},
    ]
    (tmp_path / "frames").write_text("".join(json.dumps(f) + "\n" for f in frames))
    script = (
        'head -c 10M /dev/zero > "$D/filler" 2>/dev/null; '
        f'exec {" ".join(RAVEN)} acp --model echo < "{tmp_path / "frames"}"'
    )
    done = on_a_small_disk(home / "data", script, env, tmp_path)
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    assert answers[0]["result"]["protocolVersion"] == 1
    error = answers[1]["error"]
    assert "is full" in error["message"] and "raven.db" in error["message"], error
    assert 2 in answers  # still serving after it
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("damage", ["garbage pages", "not a database"])
def test_a_damaged_store_is_named_with_what_to_do(
    env: dict[str, str], home: Path, tmp_path: Path, damage: str
) -> None:
    for n in range(4):  # enough pages that the damage lands past the header
        said = f"turn {n} " + "x" * 8000
        assert raven("run", "--model", "echo", said, env=env).returncode == 0
    db = home / "data" / "raven.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    if damage == "garbage pages":
        raw[4096 * 2 :] = os.urandom(len(raw) - 4096 * 2)
    else:
        raw[:100] = os.urandom(100)
    db.write_bytes(bytes(raw))
    for args in (("sessions", "list"), ("run", "--model", "echo", "again")):
        done = raven(*args, env=env, cwd=tmp_path)
        assert done.returncode != 0
        assert "Traceback" not in done.stderr and "DatabaseError" not in done.stderr
        assert f"{db}: it is damaged" in done.stderr, done.stderr
        assert "move it aside" in done.stderr


def test_a_damaged_task_file_of_an_earlier_raven_is_named_with_what_to_do(
    env: dict[str, str], home: Path
) -> None:
    """Tasks an earlier Raven kept in `a2a-tasks.db` are moved into raven.db at the first
    start; a file that cannot be read stops the start, saying what to do."""
    from tests.e2e.a2a_server import configure

    configure(home, [], task_store="sessions")
    db = home / "data" / "a2a-tasks.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    done = subprocess.run(
        [*RAVEN, "a2a", "serve", "--port", "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert f"A2A tasks of {db} into the session store: it is damaged" in done.stderr, done.stderr
    assert "move it aside" in done.stderr

"""ListTasks' first and hundredth page with 1,000 and with 100,000 tasks kept, through
`raven a2a serve` with tasks beside the sessions: in SQLite, and in PostgreSQL when
Debian's postgresql package is there. A keyset page costs the same however many
tasks there are; a page that walked the store would grow a hundredfold.

The tasks are written straight into the store's tables (as Raven writes them: each a
task of 2 messages and an artifact), then the server is started on them.

    uv run python bench/list_tasks.py [--tries 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

# bench/a2a.py would stand for the a2a package while this folder leads the path.
_here = sys.path.pop(0)
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus  # noqa: E402

sys.path[:0] = [_here, str(Path(__file__).parent.parent)]
from loadgen import TOKEN, free_port, wait_listening  # noqa: E402

from raven.sessions import SqliteStore  # noqa: E402
from tests.postgres import fresh_database, postgres_server, server_binaries  # noqa: E402

SIZES = (1_000, 100_000)
PAGE = 50


def task_rows(count: int) -> list[tuple[object, ...]]:
    """(id, owner, context, state, updated_us, body) for `count` finished tasks."""
    rows = []
    for n in range(count):
        task = Task(
            id=f"task-{n:06}",
            context_id=f"ctx-{n:06}",
            status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
            history=[Message(message_id=f"m{n}", role=Role.ROLE_USER, parts=[Part(text="hello")])],
            artifacts=[Artifact(artifact_id="a", name="response", parts=[Part(text="hello")])],
        )
        stamp = 1_767_225_600_000_000 + n * 1000
        task.status.timestamp.FromMicroseconds(stamp)
        rows.append(
            (
                task.id,
                "operator",
                task.context_id,
                "TASK_STATE_COMPLETED",
                stamp,
                task.SerializeToString(),
            )
        )
    return rows


def fill_sqlite(data: Path, rows: list[tuple[object, ...]]) -> None:
    SqliteStore(data / "raven.db").close()  # the schema, as Raven makes it
    with sqlite3.connect(data / "raven.db") as db:
        db.executemany(
            "INSERT INTO tasks (id, owner, context_id, state, updated_us, body, version)"
            " VALUES (?, ?, ?, ?, ?, ?, 1)",
            rows,
        )


async def fill_postgres(url: str, rows: list[tuple[object, ...]]) -> None:
    import asyncpg

    from raven.sessions.postgres_schema import migrate

    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
        await conn.executemany(
            "INSERT INTO raven_tasks (id, owner, context_id, state, updated_us, body, version)"
            " VALUES ($1, $2, $3, $4, $5, $6, 1)",
            rows,
        )
    finally:
        await conn.close()


def configure(home: Path, sessions: dict[str, object]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = {
        "defaultModel": "echo",
        "sessions": sessions,
        "a2a": {"server": {"token": TOKEN, "taskStore": "sessions"}},
    }
    (home / "config.json").write_text(json.dumps(config))
    (home / "config.json").chmod(0o600)


def pages(home: Path, tries: int) -> tuple[float, float]:
    """Median ms of the first and of the hundredth page, over `tries` walks."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raven", "a2a", "serve", "--port", str(port)],
        env={**os.environ, "RAVEN_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port)
        url = f"http://127.0.0.1:{port}/a2a"
        headers = {"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"}
        first, hundredth = [], []
        with httpx.Client(headers=headers, timeout=60) as http:
            for _ in range(tries):
                token = ""
                for n in range(1, 101):
                    params = {"pageSize": PAGE} | ({"pageToken": token} if token else {})
                    body = {"jsonrpc": "2.0", "id": n, "method": "ListTasks", "params": params}
                    start = time.perf_counter()
                    got = http.post(url, json=body).json()
                    took = (time.perf_counter() - start) * 1000
                    if "result" not in got:
                        raise SystemExit(f"ListTasks answered {got}")
                    token = got["result"]["nextPageToken"]
                    if n == 1:
                        first.append(took)
                    elif n == 100:
                        hundredth.append(took)
        return statistics.median(first), statistics.median(hundredth)
    finally:
        proc.terminate()
        proc.wait(20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()
    results: dict[tuple[str, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        for size in SIZES:
            rows = task_rows(size)
            home = root / f"sqlite-{size}"
            configure(home, {})
            (home / "data").mkdir(parents=True)
            fill_sqlite(home / "data", rows)
            results[("SQLite", size)] = pages(home, args.tries)
        if server_binaries() is None:
            print("(PostgreSQL left out: its server is not installed)")
        else:
            server = stack.enter_context(postgres_server())
            for size in SIZES:
                url = stack.enter_context(fresh_database(server))
                asyncio.run(fill_postgres(url, task_rows(size)))
                home = root / f"pg-{size}"
                configure(home, {"url": url})
                results[("PostgreSQL", size)] = pages(home, args.tries)
    print(f"{'store':12} {'tasks':>8} {'page 1 ms':>10} {'page 100 ms':>12}")
    for (store, size), (first, hundredth) in results.items():
        print(f"{store:12} {size:8} {first:10.2f} {hundredth:12.2f}")


if __name__ == "__main__":
    main()

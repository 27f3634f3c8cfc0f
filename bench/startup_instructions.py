"""Start-up cost in CPU instructions (valgrind's callgrind, whole processes): the
commands people and editors launch most, beside the floors under them, in one run.

Instructions do not move with a busy machine as `bench/startup.py`'s and `bench/acp.py`'s
wall times do. #59's aims are written in them:

- `raven sessions list` at most a third of `raven run --model echo hi`;
- `raven run --model echo hi` at most 2x `import typer, pydantic, rich.console`;
- `raven acp` spawn -> session/new at most 0.3x the ACP SDK's echo agent
  (bench/floor/sdk_echo_agent.py), each fed `initialize` and `session/new` on a pipe and
  counted to its exit at the end of input.

The floors say what no change inside Raven can remove: a typer command that does nothing
(bench/floor/typer_command.py: typer 0.29 validates options with pydantic, so invoking any
command imports it); and importing what `raven acp` needs to answer `session/new` at all
(asyncio, its ACP wire models and its config schema, both pydantic).

    uv run python bench/startup_instructions.py

Needs valgrind (`apt-get install valgrind`); a run takes a few minutes. Byte-code caches
are written by one plain run of each before it is counted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
PY = sys.executable


def acp_input(cwd: str) -> bytes:
    frames = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []},
        },
    ]
    return b"".join(json.dumps(f).encode() + b"\n" for f in frames)


def count(argv: list[str], env: dict[str, str], stdin: bytes | None = None) -> int:
    """Instructions of one run of `argv` (after a plain run that writes byte-code caches)."""
    plain = subprocess.run(argv, input=stdin, env=env, capture_output=True)
    if plain.returncode != 0:
        raise SystemExit(f"{argv} exited {plain.returncode}: {plain.stderr.decode()[-2000:]}")
    if stdin is not None and b'"id":1,"result"' not in plain.stdout.replace(b" ", b""):
        raise SystemExit(f"{argv} did not answer session/new: {plain.stdout[-500:]!r}")
    with tempfile.TemporaryDirectory() as out:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out"]
        run = subprocess.run([*valgrind, *argv], input=stdin, env=env, capture_output=True)
    found = re.search(rb"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{argv}: callgrind failed:\n{run.stderr.decode()[-2000:]}")
    return int(found.group(1))


def main() -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind: apt-get install valgrind")
    with tempfile.TemporaryDirectory() as home:
        Path(home, "config.json").write_text('{"defaultModel": "echo"}')
        env = {**os.environ, "RAVEN_HOME": home}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's machine keeps its caches
        subprocess.run(
            [PY, "-m", "raven", "run", "--model", "echo", "hi"],
            env=env,
            check=True,
            capture_output=True,
        )
        acp = acp_input(home)
        rows = {
            "python -c pass": count([PY, "-c", "pass"], env),
            "import typer, pydantic, rich.console": count(
                [PY, "-c", "import typer, pydantic, rich.console"], env
            ),
            "a typer command that does nothing": count(
                [PY, str(HERE / "floor" / "typer_command.py"), "hello"], env
            ),
            "raven run --model echo hi": count(
                [PY, "-m", "raven", "run", "--model", "echo", "hi"], env
            ),
            "raven sessions list": count([PY, "-m", "raven", "sessions", "list"], env),
            "import asyncio + ACP wire + config": count(
                [PY, "-c", "import asyncio, raven.acp.protocol, raven.config.schema"], env
            ),
            "raven acp -> session/new": count([PY, "-m", "raven", "acp"], env, acp),
            "ACP SDK agent -> session/new": count(
                [PY, str(HERE / "floor" / "sdk_echo_agent.py")], env, acp
            ),
        }
    for name, n in rows.items():
        print(f"{name:40} {n / 1e6:8.0f} M")
    run, listing = rows["raven run --model echo hi"], rows["raven sessions list"]
    libraries, typer_floor = (
        rows["import typer, pydantic, rich.console"],
        rows["a typer command that does nothing"],
    )
    acp_raven, acp_sdk = rows["raven acp -> session/new"], rows["ACP SDK agent -> session/new"]
    acp_floor = rows["import asyncio + ACP wire + config"]
    floor = typer_floor / run
    print(
        f"sessions list / run: {listing / run:.2f} (aim <= 0.33; a bare typer command: {floor:.2f})"
    )
    print(f"run / (typer + pydantic + rich): {run / libraries:.2f} (aim <= 2)")
    print(
        f"raven acp / SDK agent, spawn -> session/new: {acp_raven / acp_sdk:.2f}"
        f" (aim <= 0.3; importing what it needs: {acp_floor / acp_sdk:.2f})"
    )


if __name__ == "__main__":
    main()

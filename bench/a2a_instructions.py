"""CPU instructions per A2A SendMessage: Raven's A2A routes, the a2a-sdk's Starlette app
and a bare aiohttp handler, each with its load client in one process, counted by
valgrind's callgrind. The figure does not move with a busy machine as `bench/a2a.py`'s
wall-clock rates do, so it shows what a change saves (it leaves out the kernel's time:
socket and file writes, lock calls).

    uv run python bench/a2a_instructions.py [--requests 100]

Needs valgrind (`apt-get install valgrind`). Each server gets 150 requests to warm up,
then `--requests` counted ones, one at a time; a run takes a minute or two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
# This directory's a2a.py would stand in for the a2a package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE.resolve()]
TOKEN = "bench-token-0123456789abcdefghijklmnopqrstuvwxyz"
WARM_UP = 150
KINDS = ("raven", "sdk", "bare")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_raven(port: int) -> Any:
    home = tempfile.mkdtemp()
    os.environ["RAVEN_HOME"] = home
    config = Path(home, "config.json")
    server = {"token": TOKEN, "maxConcurrentTasks": 64}
    config.write_text(json.dumps({"defaultModel": "echo", "a2a": {"server": server}}))
    config.chmod(0o600)
    from aiohttp import web

    from raven.a2a import add_a2a_routes, build_mount
    from raven.compose.runtime import build_runtime
    from raven.config import load_config, resolve_paths

    paths = resolve_paths(None)
    settings = load_config(paths.config_file)
    runtime = build_runtime(settings, paths, face="a2a")
    mount = build_mount(runtime, settings.a2a.server)
    app = web.Application()
    add_a2a_routes(app, mount)
    return await _aiohttp(app, port)


async def start_bare(port: int) -> Any:
    from aiohttp import web

    sys.path.insert(0, str(HERE / "floor"))
    from bare_aiohttp import rpc

    app = web.Application()
    app.router.add_post("/a2a", rpc)
    return await _aiohttp(app, port)


async def _aiohttp(app: Any, port: int) -> Any:
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner.cleanup


async def start_sdk(port: int) -> Any:
    import uvicorn

    sys.path.insert(0, str(HERE / "floor"))
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes.agent_card_routes import create_agent_card_routes
    from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from sdk_a2a_echo import EchoExecutor
    from starlette.applications import Starlette

    from raven.a2a.card import agent_card

    card = agent_card(f"http://127.0.0.1:{port}/a2a")
    handler = DefaultRequestHandler(EchoExecutor(), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")]
    config = uvicorn.Config(
        Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    async with asyncio.timeout(30):
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
            await asyncio.sleep(0.01)

    async def stop() -> None:
        server.should_exit = True
        await serving

    return stop


async def measured(kind: str, requests: int) -> None:
    """Serve `kind` and send it requests; callgrind counts only the last `requests`."""
    import aiohttp

    port = free_port()
    stop = await {"raven": start_raven, "sdk": start_sdk, "bare": start_bare}[kind](port)
    url = f"http://127.0.0.1:{port}/a2a"
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "A2A-Version": "1.0",
        "Content-Type": "application/json",
    }
    try:
        async with aiohttp.ClientSession() as http:

            async def send(n: int) -> None:
                message = {
                    "messageId": f"m{n}",
                    "role": "ROLE_USER",
                    "parts": [{"text": f"hi {n}"}],
                }
                body = {"jsonrpc": "2.0", "id": n, "method": "SendMessage"}
                body["params"] = {"message": message}
                async with http.post(url, data=json.dumps(body), headers=headers) as response:
                    answer = await response.read()
                    assert b"TASK_STATE_COMPLETED" in answer, answer

            for n in range(WARM_UP):
                await send(n)
            _instrument("on")
            for n in range(requests):
                await send(WARM_UP + n)
            _instrument("off")
    finally:
        await stop()


def _instrument(state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], capture_output=True)


def count(kind: str, requests: int) -> float:
    """Instructions per request for `kind`, from a callgrind run of this script."""
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}/callgrind.out",
                sys.executable,
                __file__,
                "--measured",
                kind,
                "--requests",
                str(requests),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        )
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{kind}: callgrind failed:\n{run.stderr[-2000:]}")
    return int(found.group(1)) / requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--measured", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measured:
        asyncio.run(measured(args.measured, args.requests))
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind: apt-get install valgrind")
    figures = {kind: count(kind, args.requests) for kind in KINDS}
    for kind, per in figures.items():
        print(f"{kind:6} {per / 1e6:6.2f} M instructions a request (client included)")
    print(f"sdk / raven: {figures['sdk'] / figures['raven']:.2f}×")


if __name__ == "__main__":
    main()

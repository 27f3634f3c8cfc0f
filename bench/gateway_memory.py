"""Gateway memory and per-event cost: does `raven gateway` give memory back?

`raven gateway` driven over real WebSockets on loopback, its resident memory read from
/proc after each phase (once it has been idle for `--idle` seconds):

1. **baseline**: one session with one turn of the offline echo model;
2. **many sessions**: `--sessions` sessions (8 at a time) of 5 echo turns each, every
   socket closed after its session;
3. **a big turn**: one turn streaming `--big-mb` MB from a model server on loopback that
   speaks OpenAI's streaming wire (4 KiB a delta), its socket closed after;
4. **per-event CPU**: 64 sessions streaming at once, each on its own socket: the
   gateway's CPU time (utime + stime) over the events its UIs received.

The aims of the long-sessions issue: RSS within 10 MiB of the baseline after (2), within
20 MiB after (3).

    uv run python bench/gateway_memory.py [--sessions 400] [--big-mb 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from gateway import Ui, start_gateway

CHUNK = 4096


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def big_model(size: int) -> tuple[web.AppRunner, int]:
    """A model server streaming `size` bytes of text as Chat Completions deltas."""

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        piece = ("streamed " * (CHUNK // 9 + 1))[:CHUNK]
        for sent in range(0, size, CHUNK):
            delta = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await response.write(f"data: {json.dumps(delta)}\n\n".encode())
            if sent % (CHUNK * 64) == 0:
                await asyncio.sleep(0)
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await response.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def one_session(
    http: aiohttp.ClientSession,
    url: str,
    headers: dict[str, str],
    cwd: str,
    turns: int,
    model: str | None = None,
) -> int:
    ui = Ui(await http.ws_connect(url, headers=headers, max_msg_size=0))
    try:
        params = {"cwd": cwd, **({"model": model} if model else {})}
        sid = (await ui.call("session.create", **params))["sessionId"]
        for _ in range(turns):
            ui.ended.clear()
            await ui.call("turn.send", sessionId=sid, text="hello " * 20)
            await asyncio.wait_for(ui.ended.wait(), 600)
        return ui.events
    finally:
        await ui.ws.close()
        await ui.reader


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--big-mb", type=int, default=50)
    parser.add_argument("--idle", type=float, default=3.0)
    args = parser.parse_args()
    runner, model_port = await big_model(args.big_mb * 1_000_000)
    with tempfile.TemporaryDirectory() as home:
        big = {
            "id": "big",
            "provider": "openai",
            "baseUrl": f"http://127.0.0.1:{model_port}/v1",
            "contextWindow": 100_000_000,
        }
        # Sessions no UI follows leave memory after a second (the default is a minute).
        config = {"models": [big], "defaultModel": "echo", "limits": {"idleSessionS": 1}}
        Path(home, "config.json").write_text(json.dumps(config))
        proc, url, headers = start_gateway(home)
        try:
            async with aiohttp.ClientSession() as http:
                await one_session(http, url, headers, home, 1)
                await asyncio.sleep(args.idle)
                baseline = rss_mib(proc.pid)
                print(f"baseline: {baseline:.1f} MiB")

                pending = list(range(args.sessions))

                async def worker() -> None:
                    while pending:
                        pending.pop()
                        await one_session(http, url, headers, home, 5)

                start = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(8)))
                took = time.perf_counter() - start
                await asyncio.sleep(args.idle)
                after = rss_mib(proc.pid)
                print(
                    f"after {args.sessions} sessions x 5 turns ({took:.1f} s): {after:.1f} MiB"
                    f" ({after - baseline:+.1f})"
                )

                events = await one_session(http, url, headers, home, 1, model="big")
                await asyncio.sleep(args.idle)
                after_big = rss_mib(proc.pid)
                hwm = next(
                    int(line.split()[1]) / 1024
                    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                    if line.startswith("VmHWM:")
                )
                print(
                    f"after a {args.big_mb} MB turn ({events} events): {after_big:.1f} MiB"
                    f" ({after_big - baseline:+.1f}); peak {hwm:.1f} MiB"
                )

                uis = [Ui(await http.ws_connect(url, headers=headers)) for _ in range(64)]
                ids = [(await u.call("session.create", cwd=home))["sessionId"] for u in uis]
                before_cpu = cpu_s(proc.pid)
                for _ in range(3):
                    for u in uis:
                        u.ended.clear()
                    await asyncio.gather(
                        *(
                            u.call("turn.send", sessionId=s, text="word " * 400)
                            for u, s in zip(uis, ids, strict=True)
                        )
                    )
                    await asyncio.gather(*(asyncio.wait_for(u.ended.wait(), 120) for u in uis))
                spent = cpu_s(proc.pid) - before_cpu
                delivered = sum(u.events for u in uis)
                print(
                    f"64 streaming sessions: {delivered} events, "
                    f"{spent / delivered * 1e6:.1f} us of gateway CPU per event"
                )
                for u in uis:
                    await u.ws.close()
        finally:
            proc.terminate()
            proc.wait(10)
            await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())

"""`raven run` with a long streamed answer: time and peak memory as the answer grows.

A model server on loopback speaking OpenAI's streaming wire (in this process, so the
answer it holds is not counted in Raven's memory) streams an answer of each size (a
word a delta: common words, or with `--text docs` English from Raven's own docs in random
order, which compresses about as prose does) to `raven run hi` writing to a file; each
run's wall time, CPU time and peak RSS, against a one-word turn's. Aims (#59): the
largest size takes at most 5x the time of one a quarter its size, and peaks at most 3x
the answer above the one-word turn.

    uv run python bench/big_answer.py [--mb 16 64] [--text words|docs]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

VOCABULARY = (
    "the quick brown fox jumps over a lazy dog while Raven streams its long answer to the terminal"
).split()


def answer_of(megabytes: float, text: str = "words") -> str:
    words = itertools.cycle(VOCABULARY) if text == "words" else _docs_words()
    size, out = 0, []
    while size < megabytes * 1_000_000:
        word = next(words)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def _docs_words() -> itertools.chain[str]:
    """Sentences of docs/*.md in random order, word by word, for ever."""
    docs = Path(__file__).parent.parent / "docs"
    prose = " ".join(p.read_text() for p in sorted(docs.glob("*.md")))
    sentences = [s.split() for s in re.split(r"(?<=[.!?])\s+", prose) if s.strip()]
    pick = random.Random(0)
    return itertools.chain.from_iterable(pick.choice(sentences) for _ in itertools.count())


class Model:
    """The model server, in a thread of its own: `answer` is what it streams next."""

    def __init__(self) -> None:
        self.answer = "hi"
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    async def _start(self) -> int:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._stream)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        batch: list[bytes] = []
        for word in self.answer.split(" "):
            delta = {"choices": [{"index": 0, "delta": {"content": word + " "}}]}
            batch.append(f"data: {json.dumps(delta)}\n\n".encode())
            if len(batch) == 256:
                await response.write(b"".join(batch))
                batch = []
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        batch.append(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
        await response.write(b"".join(batch))
        return response


def run(home: Path, model: Model, text: str) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one `raven run hi` answering `text`."""
    model.answer = text
    spec = {"id": "m", "provider": "openai", "baseUrl": f"http://127.0.0.1:{model.port}/v1"}
    (home / "config.json").write_text(json.dumps({"models": [spec]}))
    env = {**os.environ, "RAVEN_HOME": str(home)}
    with open(home / "answer.txt", "wb") as out, open(os.devnull, "wb") as quiet:
        start = time.perf_counter()
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "raven", "run", "hi"],
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, quiet.fileno(), 2),
            ],
        )
        peak = 0.0
        while True:  # its own high-water mark, read until it exits (see `high_water`)
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            peak = max(peak, high_water(pid))
            time.sleep(0.002)
        wall = time.perf_counter() - start
    assert os.waitstatus_to_exitcode(status) == 0, f"raven run failed ({status})"
    assert (home / "answer.txt").stat().st_size >= len(text)
    return wall, usage.ru_utime + usage.ru_stime, peak


def high_water(pid: int) -> float:
    """The process's peak RSS (MiB) so far, 0 once it is gone. Not `ru_maxrss`: a child
    spawned from this process starts with this one's (holding the answer it serves) as
    its own, so that figure is this process's whenever it is the larger."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, nargs="+", default=[16.0, 64.0])
    parser.add_argument("--text", choices=["words", "docs"], default="words")
    args = parser.parse_args()
    sizes = args.mb
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        model = Model()
        _, _, floor = run(home, model, "hi")
        print(f"one-word turn: peak RSS {floor:.0f} MiB")
        header = ("answer MB", "wall s", "CPU s", "peak MiB", "above / answer")
        print("{:>10} {:>8} {:>8} {:>9} {:>15}".format(*header))
        walls: dict[float, float] = {}
        for mb in sizes:
            wall, cpu, peak = run(home, model, answer_of(mb, args.text))
            walls[mb] = wall
            above = (peak - floor) / (mb * 1_000_000 / 2**20)
            print(f"{mb:10.1f} {wall:8.1f} {cpu:8.1f} {peak:9.0f} {above:14.1f}x")
        first, last = sizes[0], sizes[-1]
        print(
            f"{last:g} MB took {walls[last] / walls[first]:.1f}x the time of {first:g} MB "
            f"({last / first:g}x the answer; aim: at most 5x for 4x)"
        )


if __name__ == "__main__":
    main()

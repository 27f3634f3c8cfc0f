"""Delegation overhead: a task through `delegate` to a cold sub-agent (spawn, initialize,
session/new, the answer) and to a warm one (its process and session reused).

The sub-agent is `raven acp` on the echo model. A bare `raven acp` driven straight over
its pipes (spawn to the prompt's answer) is measured in the same run as the reference.
Aims: warm overhead under 10 ms; cold under 1.5x the bare run. The cold run is measured
twice, interleaved: with one agent configured (no broker), and with two and the broker
bound to a store, the child given the broker's `a2a` tool it never uses: the broker
adds no work a child does not ask of it.

    uv run python bench/subagents.py [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raven.acp_client import AgentsSource
from raven.config import AgentSpec, BrokerConfig, Limits, Paths, SessionsConfig
from raven.sessions import open_sessions
from raven.tools import ToolContext


def bare_driver() -> Any:
    """`one_run` of bench/acp.py: spawn a `raven acp` and drive it over its pipes."""
    spec = importlib.util.spec_from_file_location("bench_acp", Path(__file__).with_name("acp.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.one_run


async def no_answer(question: object) -> None:
    return None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        os.environ["RAVEN_HOME"] = home
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        argv = [sys.executable, "-m", "raven", "acp", "--model", "echo"]
        spec = AgentSpec(name="echo", command=argv[0], args=argv[1:])
        ctx = ToolContext(cwd=Path(home), limits=Limits(), ask=no_answer, session_id="bench")

        one_run = bare_driver()
        bare = []
        for _ in range(runs + 1):
            init, new, prompt, _, _ = await one_run(argv, dict(os.environ), home)
            bare.append(init + new + prompt)
        paths = Paths(config_file=Path(home) / "config.json", data_dir=Path(home) / "data")
        store = open_sessions(SessionsConfig(), paths)
        sibling = AgentSpec(name="sibling", command=argv[0], args=argv[1:])
        cold, brokered = [], []
        for _ in range(runs + 1):
            for times, agents in ((cold, [spec]), (brokered, [spec, sibling])):
                source = AgentsSource(agents)
                if len(agents) > 1:
                    source.bind(store, BrokerConfig())
                start = time.perf_counter()
                await source.delegate(ctx, "echo", "hello")
                times.append((time.perf_counter() - start) * 1000)
                await source.aclose()
        await store.aclose()
        source = AgentsSource([spec])
        await source.delegate(ctx, "echo", "warm up")
        warm = []
        for _ in range(runs):
            start = time.perf_counter()
            await source.delegate(ctx, "echo", "hello")
            warm.append((time.perf_counter() - start) * 1000)
        await source.aclose()
    b, c, k, w = (
        statistics.median(x[1:] if x is not warm else x) for x in (bare, cold, brokered, warm)
    )
    print(f"bare raven acp (spawn to answer)  {b:7.1f} ms")
    print(f"delegate, cold sub-agent          {c:7.1f} ms  ({c / b:.2f}x bare; aim < 1.5x)")
    print(f"  the same, broker on             {k:7.1f} ms  ({k / c:.2f}x without)")
    print(f"delegate, warm sub-agent          {w:7.1f} ms  (aim < 10 ms)")


if __name__ == "__main__":
    asyncio.run(main())

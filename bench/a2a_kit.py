"""The A2A 1.0 conformance kit (a2aproject/a2a-tck, its `1.0-dev` line) against
`raven a2a serve`, on all three bindings.

    git clone -b 1.0-dev https://github.com/a2aproject/a2a-tck /tmp/tck
    (cd /tmp/tck && uv sync && uv pip install pytest-timeout)
    uv run python bench/a2a_kit.py /tmp/tck answer must    # or ask; must, should, may
    uv run python bench/a2a_kit.py /tmp/tck answer must --stdio

With `--stdio`, the kit drives `raven a2a stdio` over its pipes through
`bench/stdio_bridge.py` (an HTTP front that only carries frames), on the JSON-RPC
binding alone.

The kit sends no credentials, and Raven wants its bearer token on every call: this
puts a `sitecustomize.py` in the kit's environment that adds `Authorization` to
every httpx request and gRPC channel it makes (when TCK_BEARER is set).

The kit's scenarios expect its own test agent, which reads the message id: "complete"
tasks end at once, "input-required" ones wait. Raven's model sees only the text, which
is the same for both, so the model here (an OpenAI-compatible server on loopback)
plays one of them per run: `answer` answers every message, `ask` asks a question on
the kit's "TCK prerequisite task creation" and history messages. Run both: each test
that needs a scenario passes in the run that plays it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import tempfile
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.fakes.model_server import openai_stream

TOKEN = "kit-token-0123456789abcdefghijklmnop"
ASKED_BY = ("TCK prerequisite task creation", "TCK history message")
SITECUSTOMIZE = """# From Raven's bench/a2a_kit.py: the bearer token on every request the kit makes.
import os
if os.environ.get("TCK_BEARER"):
    import grpc, httpx
    _bearer = "Bearer " + os.environ["TCK_BEARER"]
    _init = httpx.Client.__init__
    def _client(self, *a, **k):
        _init(self, *a, **k)
        self.headers.setdefault("Authorization", _bearer)
    httpx.Client.__init__ = _client
    _request = httpx.request
    def _one(method, url, *a, headers=None, **k):
        return _request(method, url, *a, headers={"Authorization": _bearer, **(headers or {})}, **k)
    httpx.request = _one
    for _verb in ("get", "post", "put", "delete", "patch"):
        setattr(httpx, _verb, lambda url, *a, _v=_verb, **k: _one(_v.upper(), url, *a, **k))
    class _Auth(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
        def _add(self, d):
            return d._replace(metadata=[*(d.metadata or []), ("authorization", _bearer)])
        def intercept_unary_unary(self, c, d, r):
            return c(self._add(d), r)
        def intercept_unary_stream(self, c, d, r):
            return c(self._add(d), r)
    _channel = grpc.insecure_channel
    grpc.insecure_channel = lambda *a, **k: grpc.intercept_channel(_channel(*a, **k), _Auth())
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def model(mode: str) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        last = (await request.json())["messages"][-1]
        said = json.dumps(last.get("content"))
        if mode == "ask" and last["role"] in ("user", "tool") and any(t in said for t in ASKED_BY):
            question = json.dumps({"question": "Which one?"})
            blocks = openai_stream(tool_calls=[("c1", "ask_user", question)])
        else:
            blocks = openai_stream(text="Done.")
        response = web.StreamResponse()
        response.content_type = "text/event-stream"
        await response.prepare(request)
        for block in blocks:
            await response.write(block.encode() + b"\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


async def main(kit: Path, mode: str, level: str, extra: list[str], stdio: bool) -> int:
    (site,) = kit.glob(".venv/lib/python*/site-packages")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    runner = web.AppRunner(model(mode))
    await runner.setup()
    model_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", model_port).start()
    home = Path(tempfile.mkdtemp(prefix="raven-kit-"))
    server = {
        "token": TOKEN,
        "grpcPort": 0,
        "approvals": "auto",
        # The kit leaves many tasks waiting for input, each holding a turn.
        "maxConcurrentTasks": 512,
        "maxQueuedTasks": 512,
        "maxQueuedPerContext": 64,
        "push": {"allowPrivate": ["127.0.0.1", "localhost", "::1"]},
    }
    base_url = f"http://127.0.0.1:{model_port}/v1"
    openai = {"id": "m", "provider": "openai", "model": "kit", "baseUrl": base_url, "apiKey": "x"}
    config = {"models": [openai], "a2a": {"server": server}}
    (home / "config.json").write_text(json.dumps(config))
    (home / "config.json").chmod(0o600)
    port = free_port()
    command = ["-m", "raven", "a2a", "serve", "--port", str(port)]
    if stdio:
        command = [str(Path(__file__).with_name("stdio_bridge.py")), str(port)]
    raven = await asyncio.create_subprocess_exec(
        sys.executable,
        *command,
        env={**os.environ, "RAVEN_HOME": str(home)},
        stdout=asyncio.subprocess.PIPE,
    )
    assert raven.stdout is not None
    while line := (await raven.stdout.readline()).decode():
        if line.startswith("rpc:"):
            break
    kit_env = {**os.environ, "TCK_BEARER": TOKEN, "VIRTUAL_ENV": ""}
    run = await asyncio.create_subprocess_exec(
        "uv",
        "run",
        "./run_tck.py",
        "--sut-host",
        f"http://127.0.0.1:{port}",
        "--level",
        level,
        "--",
        "-rs",
        "--timeout",
        "45",
        *extra,
        cwd=kit,
        env=kit_env,
    )
    code = await run.wait()
    raven.terminate()
    await raven.wait()
    await runner.cleanup()
    return code


if __name__ == "__main__":
    kit_dir, run_mode, run_level, *rest = sys.argv[1:]
    over_stdio = "--stdio" in rest
    rest = [r for r in rest if r != "--stdio"]
    sys.exit(asyncio.run(main(Path(kit_dir), run_mode, run_level, rest, over_stdio)))

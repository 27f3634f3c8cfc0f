"""A `raven web` gateway launched as a user launches it, and headless Chromium (Debian's, driven
by Playwright) logged in through its one-time link. Screenshots of failures go to the test's
temp dir."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.children import scripted_child
from tests.conftest import RAVEN
from tests.ports import free_port

CHROMIUM = os.environ.get("RAVEN_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DEADLINE_S = 30
MS = 15_000
"""How long a page assertion waits for what it expects."""
expect.set_options(timeout=MS)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model step that calls one tool."""
    return {"toolCalls": [{"name": name, "arguments": arguments}]}


SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "stream": [
        {
            "text": "Here is **the plan**:\n\n```python\ndef greet(name):\n"
            '    return "hi " + name  # say hi\n```\n\n- [x] look\n- [ ] write\n\nDone now.',
            "wordDelayMs": 100,
        }
    ],
    "write": [
        call("write_file", path="web.txt", content="from the web\n"),
        {"text": "Written."},
    ],
    "auto": [
        call("write_file", path="auto.txt", content="no questions\n"),
        call("write_file", path="auto.txt", content="no questions\n"),  # again, the same
        {"text": "Done."},
    ],
    "reload": [
        call("write_file", path="late.txt", content="late\n"),
        {"text": "Written after the reload."},
    ],
    "ask": [
        call("ask_user", question="Which branch?", choices=["main", "dev"]),
        {"text": "Going with it."},
    ],
    "tell": [call("ask_user", question="What colour?"), {"text": "Noted."}],
    "plan": [
        {
            "thought": "First I weigh the options.",
            **call(
                "update_plan",
                entries=[
                    {"content": "Read the code", "status": "completed"},
                    {"content": "Change it", "status": "in_progress"},
                ],
            ),
        },
        {"text": "Planned."},
    ],
    "long": [{"text": "never shown", "delayMs": 60_000}],
    "drop": [
        {
            "text": "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi "
            "omicron pi rho sigma tau upsilon",
            "wordDelayMs": 150,
        }
    ],
    "shared": [
        {"text": "First answer."},
        call("write_file", path="shared.txt", content="from the chat\n"),
        {"text": "Wrote shared.txt."},
        {"text": "one two three four five six seven eight nine ten, the end.", "wordDelayMs": 150},
    ],
    "steer": [{"text": "Working on it.", "delayMs": 3000}],
    # Its window (`WINDOWS`) is passed by the second of two long prompts: the first turn
    # is summarised (the second step) before the second is answered.
    "compact": [
        {"text": "First answer."},
        {"text": "The user sent two long notes about plums."},
        {"text": "Second answer."},
    ],
    "escalate": [
        call("delegate", agent="helper", task="make kid.txt"),
        {"text": "The helper is done."},
    ],
    "broker": [
        call("delegate", agent="asker", task="ask the teller"),
        {"text": "The asker is done."},
    ],
    "escalate-edit": [
        call("delegate", agent="writer", task="note the eggs"),
        {"text": "The writer is done."},
    ],
    "inject": [
        {
            "text": 'Look: <img src=x onerror="window.pwned=1"> and '
            "[click me](javascript:window.pwned=2) and <script>window.pwned=3</script> "
            '[ok](https://example.com/"onmouseover="window.pwned=4)\n\n'
            "```html\n<img src=y onerror=window.pwned=5>\n```\n\n"
            "| tool | note |\n|---|:-:|\n| **grep** | <img src=t onerror=window.pwned=7> |\n\n"
            "3. third\n4. fourth"
        }
    ],
}


WINDOWS = {"compact": {"contextWindow": 20_000}}
"""Models with a context window of their own (tokens)."""


class WebGateway:
    """`raven web --no-open` in its own RAVEN_HOME, stopped at the end."""

    def __init__(self, home: Path, port: int, user_home: Path | None = None) -> None:
        self.home = home
        self.user_home = user_home
        """HOME for the gateway, when not the tester's own."""
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[str] | None = None
        self.first_link = ""

    @property
    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env = {**clean, "RAVEN_HOME": str(self.home), "NO_COLOR": "1"}
        return env if self.user_home is None else {**env, "HOME": str(self.user_home)}

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [*RAVEN, "web", "--no-open", "--port", str(self.port)],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"raven web exited: {self.proc.stderr.read()}")  # type: ignore[union-attr]
            if line.startswith("login:"):
                self.first_link = line.split()[1]
                return
        raise AssertionError("raven web printed no login link")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.communicate(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate()

    def rpc(self, method: str, **params: Any) -> Any:
        """One Raven RPC call with the token, as a program would make it (off Playwright's
        thread, which has its own loop)."""

        async def call() -> Any:
            token = (self.home / "gateway.token").read_text().strip()
            async with (
                aiohttp.ClientSession() as http,
                http.ws_connect(
                    self.base + "/rpc", headers={"Authorization": f"Bearer {token}"}
                ) as ws,
            ):
                await ws.send_json({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
                async with asyncio.timeout(DEADLINE_S):
                    while "id" not in (frame := await ws.receive_json()):
                        pass
            return frame["result"]

        with ThreadPoolExecutor(1) as thread:
            return thread.submit(asyncio.run, call()).result()

    def login_link(self) -> str:
        """A fresh one-time link, as `raven web` gets one from a running gateway."""
        token = (self.home / "gateway.token").read_text().strip()
        reply = httpx.post(
            self.base + "/login-links", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        reply.raise_for_status()
        return self.base + reply.json()["path"]


@contextmanager
def own_gateway(home: Path, user_home: Path | None = None) -> Iterator[WebGateway]:
    """A gateway of its own on `home` (already configured), for a test the shared one
    would disturb; stopped at the end."""
    gateway = WebGateway(home, free_port(), user_home)
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.stop()


def make_home(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    models = []
    for name, steps in SCRIPTS.items():
        (home / f"{name}.json").write_text(json.dumps(steps))
        script = str(home / f"{name}.json")
        models.append(
            {"id": name, "provider": "scripted", "script": script, **WINDOWS.get(name, {})}
        )
    # A model server that is down: nothing listens on the discard port, so a turn fails.
    models.append({"id": "down", "provider": "openai", "baseUrl": "http://127.0.0.1:9/v1"})
    config = {
        "models": models,
        "defaultModel": "stream",
        "modes": [
            {"id": "ask", "name": "Ask"},
            {"id": "auto", "name": "Auto", "approvals": "auto"},
            {"id": "jailed", "name": "Jailed", "sandbox": "workspace"},
        ],
        "defaultMode": "ask",
        "agents": [
            scripted_child(
                home / "child",
                [call("run_command", command="echo from-kid > kid.txt"), {"text": "Kid did it."}],
                description="A helper",
                rules=[{"kind": ["execute"], "action": "escalate"}],
            ),
            scripted_child(
                home / "writer",
                [call("write_file", path="eggs.md", content="- eggs\n"), {"text": "Noted."}],
                description="A writer",
                rules=[{"kind": ["edit"], "action": "escalate"}],
                name="writer",
            ),
            scripted_child(
                home / "asker",
                [call("a2a", action="send", to="teller", text="What colour?"), {"text": "Asked."}],
                description="Asks the teller",
                name="asker",
            ),
            scripted_child(home / "teller", [{"text": "Teal."}], name="teller"),
        ],
        "a2a": {"server": {"enabled": True, "token": "a2a-token-for-the-web-tests-0123"}},
    }
    (home / "config.json").write_text(json.dumps(config))
    (home / "config.json").chmod(0o600)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebGateway]:
    home = tmp_path_factory.mktemp("web") / "home"
    make_home(home)
    gateway = WebGateway(home, free_port())
    gateway.start()
    yield gateway
    gateway.stop()


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if Path(CHROMIUM).exists():
        return None
    return f"no Chromium at {CHROMIUM}: apt install chromium (or set RAVEN_TEST_CHROMIUM)"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if (missing := chromium_missing()) is not None:
        pytest.fail(missing)  # the module skips itself unless RAVEN_TEST_STRICT is set
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Page]:
    """A fresh browser context (no cookie yet); a screenshot lands in tmp_path on failure."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        tab.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
        print(f"screenshot: {tmp_path / 'failure.png'}; page errors: {errors}")
    context.close()
    assert errors == [], f"the page threw: {errors}"


def work_dir(web: WebGateway, name: str) -> Path:
    path = web.home / "work" / name
    path.mkdir(parents=True, exist_ok=True)
    return path

"""`raven demo` as a user runs it: every step shown, exit 0, nothing left behind (no process,
no file outside its temporary home, which is removed); Ctrl-C halfway cleans up too;
`--web` leaves the gateway serving the web UI until Ctrl-C."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RAVEN
from tests.processes import live_pids

DEADLINE_S = 90
STEPS = ("home", "A2A server", "a2a_send", "A2A question", "sub-agent", "gateway", "sessions")


def demo_env(tmp_path: Path) -> dict[str, str]:
    """No RAVEN_HOME, a HOME and TMPDIR of the test's own: what the demo leaves shows there."""
    for name in ("tmp", "home", "cwd"):
        (tmp_path / name).mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAVEN_", "XDG_")) and not k.endswith("_API_KEY")
    }
    return {
        **env,
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "COLUMNS": "120",
    }


Launch = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    """`raven demo ARGS` with the test's own home; one still running at the end (a test that
    failed halfway) gets Ctrl-C, so it stops what it started, as a user's would."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, **env: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [*RAVEN, "demo", *args],
            env={**demo_env(tmp_path), **env},
            cwd=tmp_path / "cwd",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line or environment names `text`."""

    def names(proc: Path, _: list[str]) -> bool:
        blob = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        return int(proc.name) != os.getpid() and text.encode() in blob

    return [
        f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:200]!r}" for pid in live_pids(names)
    ]


def assert_nothing_left(tmp_path: Path) -> None:
    assert processes_mentioning(str(tmp_path)) == []
    assert list((tmp_path / "tmp").iterdir()) == []
    assert list((tmp_path / "home").iterdir()) == []
    assert list((tmp_path / "cwd").iterdir()) == []


def read_until(proc: subprocess.Popen[str], marker: str) -> str:
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + DEADLINE_S
    while marker not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    assert marker in seen, seen + (proc.stderr.read() if proc.stderr else "")
    return seen


def test_the_demo_shows_every_face_and_leaves_nothing_behind(
    launch: Launch, tmp_path: Path
) -> None:
    proc = launch()
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, out + err
    for number, name in enumerate(STEPS, start=1):
        assert f"{number}. {name}" in out
    assert "working → TASK_STATE_COMPLETED" in out and "✓ Read RELEASE.md" in out
    assert "TASK_STATE_INPUT_REQUIRED" in out and "< TASK_STATE_COMPLETED" in out
    assert "session/request_permission" in out and "outcome allow_always" in out
    assert "- fixes the login bug" in out  # the sub-agent's file, shown
    assert "< session.event AgentText" in out
    assert "all 7 steps passed" in out and "temporary home removed" in out
    token_lines = [line for line in out.splitlines() if "Bearer" in line]
    assert token_lines and all("…******" in line for line in token_lines)
    assert_nothing_left(tmp_path)


def test_keep_leaves_the_home_with_what_the_demo_made(launch: Launch, tmp_path: Path) -> None:
    proc = launch("--keep")
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, out + err
    (home,) = (tmp_path / "tmp").iterdir()
    assert f"kept the demo's home: {home}" in out
    assert (home / "work" / "NOTES.md").read_text().startswith("# Release 1.2")
    assert "session/prompt" in (home / "acp-frames.log").read_text()
    assert stat.S_IMODE((home / "peer" / "config.json").stat().st_mode) == 0o600
    assert processes_mentioning(str(tmp_path)) == []


def test_ctrl_c_halfway_stops_everything_and_removes_the_home(
    launch: Launch, tmp_path: Path
) -> None:
    proc = launch()
    read_until(proc, "3. a2a_send")  # the A2A peer is serving
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130
    assert "interrupted: stopping what the demo started" in out
    assert_nothing_left(tmp_path)


def test_web_leaves_the_gateway_serving_the_ui_until_ctrl_c(launch: Launch, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    proc = launch("--web", BROWSER=str(browser))
    seen = read_until(proc, "Ctrl-C stops the demo")
    assert "opened the login link in your browser" in seen  # as `raven web` says it
    deadline = time.monotonic() + DEADLINE_S
    while not opened.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    link = opened.read_text().strip()
    assert "/login?code=" in link
    with httpx.Client() as browser_client:
        login = browser_client.get(link, follow_redirects=False)
        assert login.status_code == 302 and "raven_gateway" in login.headers["set-cookie"]
        page = browser_client.get(link.split("/login")[0] + "/")
        assert page.status_code == 200 and "<title>Raven</title>" in page.text
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130
    opened.unlink()
    browser.unlink()
    assert_nothing_left(tmp_path)

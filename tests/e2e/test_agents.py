"""`raven agents list | run` launched as a user launches them, and `delegate` in a turn."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import RAVEN, raven, write_config
from tests.processes import ended, pid_from

SDK_AGENT = Path(__file__).parents[1] / "acp_client" / "sdk_agent.py"


def configure(home: Path, tmp_path: Path) -> None:
    child = tmp_path / "child.json"
    child.write_text(json.dumps({"defaultModel": "echo"}))
    write_config(
        home,
        {
            "defaultModel": "echo",
            "agents": [
                {
                    "name": "helper",
                    "description": "another Raven",
                    "command": RAVEN[0],
                    "args": [*RAVEN[1:], "acp", "--config", str(child)],
                },
                {"name": "upper", "protocol": "cli", "command": "tr", "args": ["a-z", "A-Z"]},
                {"name": "ghost", "command": "no-such-agent-command"},
                {"name": "off", "command": "true", "enabled": False},
                {
                    "name": "crash",
                    "command": sys.executable,
                    "args": [str(SDK_AGENT), "crash"],
                },
                {"name": "moody", "command": sys.executable, "args": [str(SDK_AGENT), "modes"]},
                {
                    "name": "careless",
                    "command": sys.executable,
                    "args": [str(SDK_AGENT), "self-approving"],
                },
            ],
        },
    )


def test_agents_list_probes_each_and_says_what_it_found(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home, tmp_path)
    listed = raven("agents", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["helper"]["status"] == "ready" and rows["helper"]["agentName"] == "raven"
    assert rows["helper"]["capabilities"]["loadSession"] is True
    assert rows["upper"]["status"] == "ready"
    assert rows["ghost"]["status"] == "command not found: no-such-agent-command"
    assert rows["off"]["status"] == "disabled"
    assert rows["moody"]["mode"] == "default"  # it starts in auto; Raven keeps it asking
    assert rows["careless"]["status"].startswith("failed: sub-agent careless declares the modes")
    assert rows["helper"]["mode"] is None  # a Raven with no modes configured declares none
    table = raven("agents", "list", env={**env, "COLUMNS": "160"})
    assert "unattended" in table.stdout  # the trust boundary is said where agents are listed
    assert "moody" in table.stdout and "default" in table.stdout


def test_agents_run_answers_and_fails_clearly(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home, tmp_path)
    echoed = raven("agents", "run", "helper", "hello there", "--json", env=env, cwd=tmp_path)
    assert echoed.returncode == 0, echoed.stderr
    assert json.loads(echoed.stdout)["answer"] == "hello there"
    upper = raven("agents", "run", "upper", "quiet words", env=env)
    assert upper.returncode == 0 and upper.stdout.strip() == "QUIET WORDS"
    crashed = raven("agents", "run", "crash", "go", env=env)
    assert crashed.returncode == 1 and "the disk caught fire" in crashed.stderr
    unknown = raven("agents", "run", "off", "go", env=env)
    assert unknown.returncode == 2 and "no enabled sub-agent 'off'" in unknown.stderr


def test_delegate_is_never_offered_inside_a_sub_agent(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    configure(home, tmp_path)
    step = {"toolCalls": [{"name": "delegate", "arguments": {"agent": "upper", "task": "x"}}]}
    (home / "script.json").write_text(json.dumps([step, {"text": "ok"}]))
    config = json.loads((home / "config.json").read_text())
    config["models"] = [{"id": "s", "provider": "scripted", "script": "script.json"}]
    config["defaultModel"] = "s"
    write_config(home, config)
    inside = raven("run", "--yes", "go", env={**env, "RAVEN_SUBAGENT": "1"})
    assert "Unknown tool 'delegate'" in inside.stderr


def test_a_sub_agents_stderr_is_logged_masked_and_every_file_is_private(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    key = "sk-live-" + "q" * 24
    child = tmp_path / "child.json"
    child.write_text(json.dumps({"defaultModel": "echo"}))
    launch = " ".join([*RAVEN, "acp", "--config", str(child)])
    write_config(
        home,
        {
            "defaultModel": "echo",
            "agents": [
                {
                    "name": "leaky",
                    "command": "/bin/sh",
                    "args": ["-c", f"echo 'starting with api_key={key}' >&2; exec {launch}"],
                }
            ],
        },
    )
    ran = raven("agents", "run", "leaky", "hello", env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    logs = home / "logs"
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    files = list(logs.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    text = "".join(f.read_text() for f in files)
    assert "starting with api_key=[REDACTED]" in text and key not in text
    data = home / "data"
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in data.iterdir())


async def test_sigterm_stops_agents_run_and_its_sub_agent(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    import asyncio
    import signal

    pidfile = tmp_path / "agent.pid"
    write_config(
        home,
        {
            "defaultModel": "echo",
            "agents": [
                {
                    "name": "hang",
                    "command": sys.executable,
                    "args": [str(SDK_AGENT), "hang", "stubborn"],
                    "env": {"HANG_PIDFILE": str(pidfile)},
                }
            ],
        },
    )
    proc = await asyncio.create_subprocess_exec(
        *RAVEN,
        "agents",
        "run",
        "hang",
        "go",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    child = await pid_from(pidfile)
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 20) == 128 + signal.SIGTERM
    assert await ended([child])


PEAK_RSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def peak_rss_kib(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str]:
    """The peak RSS of `raven *args` (KiB), and what it printed."""
    out = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *RAVEN, *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return int(out.stdout.split()[-1]), out.stdout


def test_what_a_sub_agent_prints_is_clipped_as_it_is_read(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    def printing(mib: int) -> dict[str, object]:
        return {
            "name": f"cli{mib}",
            "protocol": "cli",
            "command": "sh",
            "args": ["-c", f"head -c {mib * 1024 * 1024} /dev/zero | tr '\\0' x"],
        }

    def chatty(mib: int) -> dict[str, object]:
        return {
            "name": f"acp{mib}",
            "command": sys.executable,
            "args": [str(SDK_AGENT), "chatty"],
            "env": {"CHATTY_MIB": str(mib)},
        }

    # 128 MiB: held whole, it would pass the 50 MiB allowance below more than twice over.
    agents = [printing(1), printing(128), chatty(1), chatty(128)]
    write_config(home, {"defaultModel": "echo", "agents": agents})
    for small, large in (("cli1", "cli128"), ("acp1", "acp128")):
        baseline, _ = peak_rss_kib(env, tmp_path, "agents", "run", small, "go")
        peak, _ = peak_rss_kib(env, tmp_path, "agents", "run", large, "go")
        assert peak - baseline < 50 * 1024, (large, baseline, peak)
    answered = raven("agents", "run", "cli128", "go", "--json", env=env, cwd=tmp_path)
    answer = json.loads(answered.stdout)["answer"]
    assert answer.startswith("xxx") and "omitted" in answer and len(answer) < 70_000

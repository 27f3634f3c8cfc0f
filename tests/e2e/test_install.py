"""Raven installed as a user installs it: the built wheel, in a fresh environment, by its
distribution name's file, and run with `uvx` from it. Dependencies are held to the lock's
versions, so they come from uv's cache (`uv sync` filled it) or the package index."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from raven import __version__

ROOT = Path(__file__).parents[2]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 1, "clientCapabilities": {}},
}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [uv(), "build", "--wheel", "--out-dir", str(dist)],
        cwd=ROOT, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The lock's versions of Raven's dependencies, as constraints."""
    path = tmp_path_factory.mktemp("lock") / "constraints.txt"
    subprocess.run(
        [uv(), "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes",
         "--all-extras", "--quiet", "--output-file", str(path)],
        cwd=ROOT, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return path


def uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    assert found, "uv runs the tests (`uv run pytest`), so it is there"
    return found


def serves_acp(raven: list[str], env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [*raven, "acp"], input=json.dumps(INIT) + "\n", env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0])["result"]


def test_the_wheel_is_named_and_versioned_from_the_one_version(wheel: Path) -> None:
    assert wheel.name == f"raven_agents-{__version__}-py3-none-any.whl"


def test_the_wheel_installs_into_a_fresh_environment_and_serves_acp(
    wheel: Path, locked: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([uv(), "venv", "--quiet", str(venv)], check=True, timeout=120)
    subprocess.run(
        [uv(), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
         "--constraints", str(locked), str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    raven = [str(venv / "bin" / "raven")]
    shown = subprocess.run([*raven, "--version"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith(f"raven {__version__}\n")
    info = serves_acp(raven, env)
    assert info["agentInfo"] == {"name": "raven", "title": "Raven", "version": __version__}
    # What the messages point an installed user at is there: no file only a checkout has.
    example = subprocess.run([*raven, "config", "example"], capture_output=True, text=True)
    assert example.returncode == 0 and json.loads(example.stdout)["models"]
    no_model = subprocess.run([*raven, "run", "hi"], env=env, capture_output=True, text=True)
    assert "`raven config example` shows every key" in no_model.stderr
    assert "example.json" not in no_model.stderr and "docs/" not in no_model.stderr


def test_uvx_runs_raven_acp_from_the_wheel(
    wheel: Path, locked: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    uvx = [uv(), "tool", "run", "--constraints", str(locked), "--from", str(wheel)]
    info = serves_acp([*uvx, "raven"], {**env, "UV_TOOL_DIR": str(tmp_path / "tools")})
    assert info["agentInfo"]["version"] == __version__  # type: ignore[index]


def test_the_registry_launch_runs_from_the_wheel(
    wheel: Path, locked: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    """`uvx raven-agents@VERSION acp`, as the ACP registry launches its entry, from the wheel."""
    uvx_entry = json.loads((ROOT / "registry" / "raven" / "agent.json").read_text())
    launch = uvx_entry["distribution"]["uvx"]
    package, _, version = launch["package"].partition("@")
    assert version == __version__ and launch["args"] == ["acp"]  # serves_acp adds `acp`
    uvx = [uv(), "tool", "run", "--constraints", str(locked), "--from", str(wheel), package]
    info = serves_acp(uvx, {**env, "UV_TOOL_DIR": str(tmp_path)})
    assert info["authMethods"]  # the registry's --auth-check wants at least one

"""The command table: every command is listed and runs, and one command does not pay for
the others' modules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from raven.cli.app import COMMANDS
from tests.conftest import raven

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes


def test_help_lists_every_command_with_its_summary(env: dict[str, str]) -> None:
    shown = raven("--help", env=env)
    assert shown.returncode == 0, shown.stderr
    listing = shown.stdout.split("Commands:")[1].splitlines()
    names = [line.split()[0] for line in listing if line.startswith("  ") and line.split()]
    assert names == list(COMMANDS)
    assert "  run       Run one turn and stream the answer to stdout." in listing


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_answers_its_own_help(env: dict[str, str], name: str) -> None:
    shown = raven(name, "--help", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"Usage: raven {name} ")


def test_an_unknown_command_is_a_usage_error(env: dict[str, str]) -> None:
    wrong = raven("sesions", "list", env=env)
    assert wrong.returncode == 2
    assert "No such command 'sesions'" in wrong.stderr


def test_listing_sessions_loads_no_other_command_nor_the_engine(env: dict[str, str]) -> None:
    code = (
        "import sys; from raven.cli.app import run_app; sys.argv = ['raven', 'sessions', 'list']\n"
        "try:\n    run_app()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('raven.cli.',"
        " 'raven.engine', 'raven.tools', 'raven.providers')))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == [
        "no sessions",
        "raven.cli.app raven.cli.complete raven.cli.help raven.cli.options raven.cli.sessions_cmd",
    ]

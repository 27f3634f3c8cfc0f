"""docs/protocols.md stays true: every command it quotes exists, every module it names too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import raven

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes

ROOT = Path(__file__).parents[1]
GUIDE = (ROOT / "docs" / "protocols.md").read_text()


def _command(quoted: str) -> str:
    """The command words of `raven a2a send CARD_URL …`: up to the first option or argument."""
    words = []
    for word in quoted.split()[1:]:
        if not re.fullmatch(r"[a-z][a-z0-9-]*", word):
            break
        words.append(word)
    return " ".join(words)


COMMANDS = sorted({_command(m) for m in re.findall(r"`(raven [a-z][^`]*)`", GUIDE)})


def test_the_guide_quotes_commands_and_modules() -> None:
    assert len(COMMANDS) >= 8
    assert re.findall(r"`(raven/[\w/]+\.py)`", GUIDE)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_quoted_command_exists(command: str, env: dict[str, str]) -> None:
    result = raven(*command.split(), "--help", env=env)
    assert result.returncode == 0, (command, result.stderr)


def test_every_named_module_exists() -> None:
    for path in re.findall(r"`(raven/[\w/]+\.py)`", GUIDE):
        assert (ROOT / path).is_file(), path

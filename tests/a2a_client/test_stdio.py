"""An A2A agent over stdio that cannot be reached is a clear error, never a hang."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from raven.a2a_client.send import PeerError
from raven.a2a_client.stdio import StdioAgent, StdioAgents
from raven.config import A2AClientConfig, AgentSpec


def spec(*args: str, **fields: object) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": "x",
            "protocol": "a2a-stdio",
            "command": sys.executable,
            "args": list(args),
            **fields,
        }
    )


async def test_an_agent_that_exits_at_once_says_so_with_its_stderr(tmp_path: Path) -> None:
    gone = spec("-c", "import sys; print('no config here', file=sys.stderr); sys.exit(3)")
    with pytest.raises(PeerError, match=r"(?s)exited with code 3.*no config here"):
        await StdioAgent.start(gone, tmp_path, 1 << 20)


async def test_an_agent_that_never_greets_is_stopped_at_its_deadline(tmp_path: Path) -> None:
    mute = spec("-c", "import time; time.sleep(60)", readyTimeoutS=0.5)
    with pytest.raises(PeerError, match=r"did not greet within 0\.5s"):
        await StdioAgent.start(mute, tmp_path, 1 << 20)


async def test_an_agent_that_is_not_configured_is_named_with_those_that_are(tmp_path: Path) -> None:
    agents = StdioAgents([spec("-c", "pass")], A2AClientConfig())
    with pytest.raises(PeerError, match="no A2A agent 'y' over stdio; configured: x"):
        await agents.send("s", "y", tmp_path, "hello")

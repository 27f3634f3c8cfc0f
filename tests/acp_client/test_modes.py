"""Which of a sub-agent's declared session modes Raven keeps it in."""

from __future__ import annotations

from typing import Any

import pytest

from raven.acp.protocol import SessionModes
from raven.acp_client.modes import NoAskingMode, asking_mode
from raven.config import AgentSpec


def declared(*ids: str, current: str = "auto") -> SessionModes:
    return SessionModes.model_validate(
        {"currentModeId": current, "availableModes": [{"id": i, "name": i} for i in ids]}
    )


def spec(**fields: Any) -> AgentSpec:
    return AgentSpec(name="child", command="child-acp", **fields)


@pytest.mark.parametrize(
    ("modes", "chosen"),
    [
        (declared("auto", "default", "acceptEdits", "plan", "bypassPermissions"), "default"),
        (declared("read-only", "workspace-write", "agent", "agent-full-access"), "read-only"),
        (declared("default", "autoEdit", "yolo"), "default"),
        (declared("ask", "auto"), "ask"),
        (None, None),  # an agent without modes is driven as it is
        (declared(), None),
    ],
)
def test_the_mode_that_asks_is_chosen_whatever_the_agent_starts_in(
    modes: SessionModes | None, chosen: str | None
) -> None:
    assert asking_mode(spec(), modes) == chosen


def test_a_configured_mode_wins_and_must_be_declared() -> None:
    assert asking_mode(spec(mode="plan"), declared("auto", "default", "plan")) == "plan"
    for modes in (declared("auto", "default"), None):
        with pytest.raises(NoAskingMode, match=r"'plan' \(agents\[\]\.mode\) is not one"):
            asking_mode(spec(mode="plan"), modes)


def test_an_agent_whose_modes_all_approve_by_themselves_is_refused() -> None:
    with pytest.raises(NoAskingMode, match="declares the modes auto, yolo and none") as refused:
        asking_mode(spec(), declared("auto", "yolo"))
    assert "agents[].mode" in str(refused.value)

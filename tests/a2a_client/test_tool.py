"""What a person approving an a2a_send call sees: the message and every file leaving the
machine, with its size; a file outside the working directory is refused before anyone is
asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from raven.a2a_client.stdio import StdioAgents
from raven.a2a_client.tool import A2ASendArgs, A2ASendTool
from raven.config import A2AConfig, Limits
from raven.tools import ToolContext, ToolError


async def no_answer(question: object) -> None:
    return None


async def test_the_preview_names_the_message_and_each_file_with_its_size(tmp_path: Path) -> None:
    (tmp_path / "plans.txt").write_text("twelve bytes")
    ctx = ToolContext(cwd=tmp_path, limits=Limits(), ask=no_answer, session_id="s")
    tool = A2ASendTool(A2AConfig(), StdioAgents([], A2AConfig().client))
    args = A2ASendArgs(
        card_url="https://peer.example/.well-known/agent-card.json",
        message="Review these plans\nplease",
        files=["plans.txt"],
    )
    assert await tool.preview(args, ctx) == (
        "to https://peer.example/.well-known/agent-card.json:\n"
        "  Review these plans\n  please\nsending plans.txt (12 bytes)"
    )
    outside = args.model_copy(update={"files": ["../secret.txt"]})
    with pytest.raises(ToolError, match="outside the working directory"):
        await tool.preview(outside, ctx)

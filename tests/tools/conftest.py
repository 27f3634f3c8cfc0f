from __future__ import annotations

from pathlib import Path

import pytest

from raven.config import Limits
from raven.tools import Question, ToolContext


async def _no_answer(question: Question) -> str | None:
    return None


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(
        cwd=tmp_path, limits=Limits(tool_output_chars=1000, command_timeout_s=5), ask=_no_answer
    )

from __future__ import annotations

import platform
from datetime import date
from pathlib import Path

from raven.engine.prompt import system_prompt
from raven.tools import builtin_tools


def test_system_prompt_names_cwd_date_platform_and_tools() -> None:
    text = system_prompt(Path("/work/project"), builtin_tools(), date(2026, 11, 29))
    assert "/work/project" in text and "2026-11-29" in text
    assert platform.system() in text
    for tool in ("read_file", "edit_file", "run_command", "ask_user", "update_plan"):
        assert f"- {tool}:" in text

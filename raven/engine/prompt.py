"""The system prompt: who Raven is, where it works, today's date, the platform, the tools."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from raven.tools import Tool


def system_prompt(cwd: Path, tools: Sequence[Tool], today: date) -> str:
    listing = "\n".join(f"- {t.name}: {t.description}" for t in tools) or "- (none)"
    return (
        "You are Raven, a careful software agent working in a user's project from the "
        "command line.\n"
        f"Working directory: {cwd}\n"
        f"Today's date: {today.isoformat()}\n"
        f"Platform: {platform.system()} {platform.release()} ({platform.machine()})\n\n"
        "Tools:\n"
        f"{listing}\n\n"
        "Relative paths are resolved against the working directory. Read before you edit. "
        "Edits and commands may need the user's approval; if one is rejected, do not retry "
        "it, ask or explain instead. Answer concisely in Markdown."
    )

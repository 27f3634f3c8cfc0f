"""The system prompt: Raven's short default, or the one a mode or model declares, and
the project's instructions after it.

Kept short on purpose: every token is paid on each cold turn, and a small local
model on a CPU pays it in seconds. The tools are described by the tool specs,
not repeated here.
"""

from __future__ import annotations

import functools
import platform
from datetime import date
from pathlib import Path

DEFAULT_PROMPT = (
    "You are Raven, a careful software agent in the user's project.\n"
    "Working directory: {cwd}\nDate: {date}\nPlatform: {platform}\n"
    "Paths are relative to the working directory. Read before you edit. If the user "
    "rejects an edit or command, do not retry it. Answer concisely in Markdown."
)


@functools.lru_cache(maxsize=64)
def system_prompt(cwd: Path, today: date, template: str | None = None, project: str = "") -> str:
    """`template` (or the default) with `{cwd}`, `{date}` and `{platform}` filled in, then
    the project's instructions (`raven.engine.project`), if any.

    Filled by plain replacement, so other braces in a custom prompt stay as written. Made
    once for a directory, day, template and instructions: a turn asks for it at every
    model call.
    """
    text = template if template is not None else DEFAULT_PROMPT
    values = {
        "{cwd}": str(cwd),
        "{date}": today.isoformat(),
        "{platform}": f"{platform.system()} {platform.release()}",
    }
    for key, value in values.items():
        text = text.replace(key, value)
    return f"{text}\n\n{project}" if project else text

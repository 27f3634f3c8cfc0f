"""Sub-agents for tests: another `raven acp` whose scripted model plays given steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import RAVEN


def scripted_child(home: Path, steps: list[dict[str, Any]], **entry: Any) -> dict[str, Any]:
    """The `agents` entry (named `helper` unless `entry` says) of a `raven acp` whose
    config and script live in `home`."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "script.json").write_text(json.dumps(steps))
    (home / "config.json").write_text(
        json.dumps({"models": [{"id": "s", "provider": "scripted", "script": "script.json"}]})
    )
    args = [*RAVEN[1:], "acp", "--config", str(home / "config.json")]
    return {"name": "helper", "command": RAVEN[0], "args": args, **entry}

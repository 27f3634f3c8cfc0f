"""Where Raven keeps its config file, its data and its logs. Creates nothing."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP_NAME = "raven"
EXAMPLE_FILE = Path(__file__).with_name("example.json")
"""A config showing every key, shipped with Raven (`raven config example`)."""
SUBAGENT_ENV = "RAVEN_SUBAGENT"
"""Set to 1 by Raven's ACP client in the sub-agents it launches."""


def is_subagent(env: Mapping[str, str] = os.environ) -> bool:
    """True inside a sub-agent process, which never serves or calls remote peers."""
    return env.get(SUBAGENT_ENV) == "1"


@dataclass(frozen=True)
class Paths:
    config_file: Path
    data_dir: Path
    config_named: bool = False
    """The config file was named (`--config`, `RAVEN_CONFIG`): it must exist."""

    @property
    def config_dir(self) -> Path:
        return self.config_file.parent

    @property
    def logs_dir(self) -> Path:
        return self.config_dir / "logs"

    @property
    def database(self) -> Path:
        return self.data_dir / "raven.db"


def resolve_paths(config_option: str | None, env: Mapping[str, str] = os.environ) -> Paths:
    """Paths for this process.

    `RAVEN_HOME=DIR` puts everything under DIR; otherwise the platform directories
    (platformdirs, app `raven`). `--config PATH`, then `RAVEN_CONFIG`, choose another
    config file; logs live beside whichever config file is in use.
    """
    home = env.get("RAVEN_HOME")
    if home:
        root = Path(home).expanduser().resolve()
        default_file, data_dir = root / "config.json", root / "data"
    else:
        import platformdirs

        default_file = Path(platformdirs.user_config_dir(APP_NAME)) / "config.json"
        data_dir = Path(platformdirs.user_data_dir(APP_NAME))
    chosen = config_option or env.get("RAVEN_CONFIG")
    config_file = Path(chosen).expanduser().resolve() if chosen else default_file
    return Paths(config_file=config_file, data_dir=data_dir, config_named=bool(chosen))

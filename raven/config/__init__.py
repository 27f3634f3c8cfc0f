"""Configuration: the schema, where files live, and atomic load/save.

Owns `config.json` and the data and log locations. Never reads another
package's state and never writes a file except through `save_config`.

Only `paths` loads with the package: the schema (pydantic) loads when one of its
names is first used, so finding the files costs nothing on start-up paths.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from raven.config.paths import EXAMPLE_FILE, SUBAGENT_ENV, Paths, is_subagent, resolve_paths

if TYPE_CHECKING:
    from raven.config.schema import (
        ECHO_MODEL_ID,
        A2AClientConfig,
        A2AConfig,
        A2APeer,
        A2APushConfig,
        A2AServerConfig,
        AgentRule,
        AgentSpec,
        BrokerConfig,
        CompactionConfig,
        GatewayConfig,
        Limits,
        McpHttpServer,
        McpServerSpec,
        McpStdioServer,
        ModelSpec,
        ModeSpec,
        RavenConfig,
        SandboxLevel,
        SessionsConfig,
        ToolFilter,
    )
    from raven.config.store import (
        ConfigError,
        load_config,
        masked,
        save_config,
        starter_config,
    )

_LAZY = {
    **dict.fromkeys(
        (
            "ECHO_MODEL_ID",
            "A2AClientConfig",
            "A2AConfig",
            "A2APeer",
            "A2APushConfig",
            "A2AServerConfig",
            "AgentRule",
            "AgentSpec",
            "BrokerConfig",
            "CompactionConfig",
            "GatewayConfig",
            "Limits",
            "McpHttpServer",
            "McpServerSpec",
            "McpStdioServer",
            "ModelSpec",
            "ModeSpec",
            "RavenConfig",
            "SandboxLevel",
            "SessionsConfig",
            "ToolFilter",
        ),
        "schema",
    ),
    **dict.fromkeys(
        ("ConfigError", "load_config", "masked", "save_config", "starter_config"), "store"
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'raven.config' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"raven.config.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ECHO_MODEL_ID",
    "EXAMPLE_FILE",
    "SUBAGENT_ENV",
    "A2AClientConfig",
    "A2AConfig",
    "A2APeer",
    "A2APushConfig",
    "A2AServerConfig",
    "AgentRule",
    "AgentSpec",
    "BrokerConfig",
    "CompactionConfig",
    "ConfigError",
    "GatewayConfig",
    "Limits",
    "McpHttpServer",
    "McpServerSpec",
    "McpStdioServer",
    "ModeSpec",
    "ModelSpec",
    "Paths",
    "RavenConfig",
    "SandboxLevel",
    "SessionsConfig",
    "ToolFilter",
    "is_subagent",
    "load_config",
    "masked",
    "resolve_paths",
    "save_config",
    "starter_config",
]

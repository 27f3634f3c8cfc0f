"""Configuration: the schema, where files live, and atomic load/save.

Owns `config.json` and the data and log locations. Never reads another
package's state and never writes a file except through `save_config`.
"""

from raven.config.paths import SUBAGENT_ENV, Paths, is_subagent, resolve_paths
from raven.config.schema import (
    ECHO_MODEL_ID,
    A2AClientConfig,
    A2AConfig,
    A2APeer,
    A2AServerConfig,
    AgentSpec,
    GatewayConfig,
    Limits,
    McpHttpServer,
    McpServerSpec,
    McpStdioServer,
    ModelSpec,
    ModeSpec,
    RavenConfig,
    ToolFilter,
)
from raven.config.store import ConfigError, load_config, masked, save_config, starter_config

__all__ = [
    "ECHO_MODEL_ID",
    "SUBAGENT_ENV",
    "A2AClientConfig",
    "A2AConfig",
    "A2APeer",
    "A2AServerConfig",
    "AgentSpec",
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
    "ToolFilter",
    "is_subagent",
    "load_config",
    "masked",
    "resolve_paths",
    "save_config",
    "starter_config",
]

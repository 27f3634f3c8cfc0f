"""The root of Raven's error tree. Each package derives its own few errors from it.

RavenError
├── config.ConfigError        bad or missing configuration (exit code 2)
├── providers.ProviderError   a model call failed (auth, not found, transport, protocol)
├── sessions.SessionNotFound  no session with that id
└── tools.ToolError           a tool refused or failed; goes back to the model
"""


class RavenError(Exception):
    """A failure Raven can explain to a person in one message."""

    exit_code: int = 1

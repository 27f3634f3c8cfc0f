"""The ACP client: Raven launches local sub-agents and drives them without a person.

Owns the sub-agent processes (spawn, drain, stop), the unattended permission
policies and the `delegate` tool. Speaks ACP through `raven.jsonrpc` and the wire
shapes of `raven.acp.protocol`; never reaches into a face's server code.
"""

from raven.acp_client.agent import AgentInfo, Outcome, SubAgent, SubAgentError
from raven.acp_client.cli_backend import run_cli
from raven.acp_client.tool import AgentsSource, DelegateTool

__all__ = [
    "AgentInfo",
    "AgentsSource",
    "DelegateTool",
    "Outcome",
    "SubAgent",
    "SubAgentError",
    "run_cli",
]

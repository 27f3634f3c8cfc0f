"""Raven's A2A agent card (v1.0), public and extended. Pure construction; no I/O."""

from __future__ import annotations

from typing import Any, Protocol

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf import struct_pb2

from raven import __version__


class About(Protocol):
    """What a served agent says of itself, for its card."""

    name: str

    @property
    def title(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def version(self) -> str: ...


SUBAGENTS_EXTENSION_URI = "urn:raven:a2a:subagents:v1"
SANDBOX_EXTENSION_URI = "urn:raven:a2a:sandbox:v1"
BEARER = "bearer"
OUTPUT_MODES = ["text/plain", "*/*"]
"""The answer is text; `attach_file` hands the peer files of any type as artifacts."""


RAVEN_SKILLS = [
    AgentSkill(
        id="general",
        name="General software work",
        description="Answer questions about a code base, change files, run commands.",
        tags=["coding", "files", "shell"],
        examples=[
            "Summarise what this repository does.",
            "Run the tests and fix failures.",
        ],
    )
]
RAVEN_DESCRIPTION = (
    "A personal software agent: reads, searches and edits files and runs commands "
    "in its working directory, with the operator's approval policy."
)


def served_card(
    rpc_url: str, agent: About, input_modes: list[str] | None = None, grpc_target: str | None = None
) -> AgentCard:
    """The public card of a configured agent Raven serves: its name, description and
    version as it and the config say, one skill naming it, Raven's interfaces."""
    title = agent.title or agent.name
    description = agent.description or f"{title}, a local agent served by Raven"
    skill = AgentSkill(
        id=agent.name,
        name=title,
        description=f"{description} (its permission requests follow the operator's rules)",
        tags=[agent.name],
    )
    card = agent_card(rpc_url, None, input_modes, grpc_target)
    card.name, card.description = title, description
    card.version = agent.version or __version__
    del card.skills[:]
    card.skills.append(skill)
    return card


def agent_card(
    rpc_url: str,
    roster: list[dict[str, Any]] | None = None,
    input_modes: list[str] | None = None,
    grpc_target: str | None = None,
    sandbox: dict[str, Any] | None = None,
) -> AgentCard:
    """The public card for an RPC endpoint at `rpc_url` (and a gRPC one at `grpc_target`,
    `host:port`); `roster` switches on the extended card; `input_modes` say what Raven
    takes (text alone when not given); `sandbox`, what Raven's commands run in."""
    interfaces = [
        AgentInterface(url=rpc_url, protocol_binding=binding, protocol_version="1.0")
        for binding in ("JSONRPC", "HTTP+JSON")  # REST paths live under the RPC path
    ]
    if grpc_target is not None:
        interfaces.append(
            AgentInterface(url=grpc_target, protocol_binding="GRPC", protocol_version="1.0")
        )
    card = AgentCard(
        name="Raven",
        description=RAVEN_DESCRIPTION,
        version=__version__,
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True, extended_agent_card=bool(roster)
        ),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=input_modes or ["text/plain"],
        default_output_modes=OUTPUT_MODES,
        skills=RAVEN_SKILLS,
    )
    if sandbox is not None:
        what = "The sandbox Raven's commands run in, and whether it is enforced."
        _extend(card, SANDBOX_EXTENSION_URI, what, sandbox)
    return card


def extended_card(public: AgentCard, roster: list[dict[str, Any]]) -> AgentCard:
    """The public card plus the local sub-agent roster, as reference data only."""
    card = AgentCard()
    card.CopyFrom(public)
    what = "Local sub-agents this Raven drives (reference only; not callable here)."
    _extend(card, SUBAGENTS_EXTENSION_URI, what, {"agents": roster, "callable": False})
    return card


def _extend(card: AgentCard, uri: str, description: str, params: dict[str, Any]) -> None:
    """Add an extension of Raven's to `card`, not required of clients."""
    struct = struct_pb2.Struct()
    struct.update(params)
    card.capabilities.extensions.append(
        AgentExtension(uri=uri, description=description, required=False, params=struct)
    )

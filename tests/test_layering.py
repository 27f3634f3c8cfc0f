"""The layers of DESIGN.md hold: the engine knows no protocol, faces never reach into each other.

Every rule is one row of `RULES`: a package and the packages it must never import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
FACES = ("acp", "a2a", "gateway", "terminal")
CLIENTS = ("acp_client", "a2a_client", "mcp")
CORE = ("config", "providers", "sandbox", "sessions", "tools")
ASSEMBLY = ("cli", "compose", "demo")

RULES: list[tuple[str, tuple[str, ...]]] = [
    ("engine", (*FACES, *CLIENTS, *ASSEMBLY)),
    *[(core, ("engine", *FACES, *CLIENTS, *ASSEMBLY)) for core in CORE],
    *[
        (face, (*(f for f in FACES if f != face), *ASSEMBLY, "sessions", "providers"))
        for face in FACES
    ],
    ("a2a_client", (*FACES, *ASSEMBLY, "acp_client", "mcp")),
    # The ACP client speaks the wire shapes the ACP face declares (raven.acp.protocol).
    ("acp_client", ("a2a", "gateway", "terminal", *ASSEMBLY, "a2a_client", "mcp")),
    ("mcp", (*FACES, *ASSEMBLY, "acp_client", "a2a_client")),
    # The broker holds tasks and serves them on a channel; its host (who wakes agents)
    # is the ACP client's.
    ("broker", ("engine", *FACES, *CLIENTS, *ASSEMBLY)),
    ("jsonrpc", ("engine", *FACES, *CLIENTS, *ASSEMBLY)),
    ("web", ("engine", *FACES, *CLIENTS, *CORE, *ASSEMBLY)),
    ("rpc", ("engine", "sessions", "providers", *FACES, *CLIENTS, *ASSEMBLY)),
    ("compose", ("cli", "demo", "terminal", "sessions")),
    ("cli", ()),
    ("demo", ("engine", *CORE, *FACES, *CLIENTS, "cli", "compose")),
]
"""(package under raven/, packages under raven/ it must never import).

A face (ACP, A2A, the gateway, the terminal) translates one protocol or screen: it never
imports another face, and reaches sessions and models only through the engine (its
runtime, types and errors). `compose` assembles the faces (a runtime with its tool
sources, A2A on the gateway), and `cli` holds the commands that call it; only they may
import several faces. `compose` never touches the session store but through the engine;
`cli` reads it straight (`raven sessions list/show/search/export` load no engine, tools or
providers) and changes it only through the engine, which owns a session's life. The demo
drives `raven` from outside, as a user does."""


def imported_packages(path: Path) -> set[str]:
    """The raven subpackages `path` imports, whatever the import's spelling."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "raven" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_every_rule_holds() -> None:
    offenders = []
    for package, forbidden in RULES:
        for path in (ROOT / "raven" / package).rglob("*.py"):
            for name in imported_packages(path) & set(forbidden):
                offenders.append(f"{path.relative_to(ROOT)} imports raven.{name}")
    assert offenders == []


def test_the_checker_sees_every_spelling(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import raven.acp.server\nfrom raven import acp\nfrom raven.a2a import mount\n"
        "from raven.engine import run_turn\nfrom . import sibling\n"
    )
    assert imported_packages(probe) == {"acp", "a2a", "engine"}


def test_the_rules_cover_every_package() -> None:
    packages = {p.name for p in (ROOT / "raven").iterdir() if (p / "__init__.py").exists()}
    assert packages - {package for package, _ in RULES} == set()


def test_scripted_run_path_does_not_import_network_stacks() -> None:
    code = (
        "import sys, raven.cli.app, raven.engine, raven.providers.scripted;"
        "print(sorted(m for m in ('httpx','aiohttp','a2a','mcp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_offering_a2a_send_and_delegate_loads_no_a2a_sdk() -> None:
    """A run with peers and sub-agents configured pays for the A2A SDK only when the model
    calls a2a_send."""
    code = (
        "import sys, raven.a2a_client.tool, raven.acp_client.tool, raven.compose;"
        "print(sorted(m for m in ('a2a', 'grpc', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""The engine knows no protocol: its import graph never reaches a face or a client."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "raven"
FACES = (
    "raven.acp",
    "raven.a2a",
    "raven.gateway",
    "raven.cli",
    "raven.mcp",
    "raven.acp_client",
    "raven.a2a_client",
)
LOWER = ("raven/engine", "raven/providers", "raven/tools", "raven/sessions", "raven/config")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_packages_import_no_face() -> None:
    offenders = []
    for layer in LOWER:
        for path in (PACKAGE.parent / layer).rglob("*.py"):
            for name in imported_modules(path):
                if name.startswith(FACES):
                    offenders.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert offenders == []


def test_scripted_run_path_does_not_import_network_stacks() -> None:
    import subprocess
    import sys

    code = (
        "import sys, raven.cli.main, raven.engine, raven.providers.scripted;"
        "print(sorted(m for m in ('httpx','aiohttp','a2a','mcp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


FACE_RULES = {
    "raven/acp": ("raven.a2a", "raven.a2a_client", "raven.cli", "raven.gateway"),
    "raven/a2a": ("raven.acp", "raven.a2a_client", "raven.cli", "raven.mcp"),
    "raven/a2a_client": ("raven.acp", "raven.a2a.", "raven.cli", "raven.mcp"),
    "raven/mcp": ("raven.acp", "raven.a2a", "raven.cli"),
    "raven/jsonrpc": ("raven.acp", "raven.a2a", "raven.cli", "raven.mcp", "raven.engine"),
}


def test_faces_do_not_reach_into_each_other() -> None:
    offenders = []
    for folder, forbidden in FACE_RULES.items():
        for path in (PACKAGE.parent / folder).rglob("*.py"):
            for name in imported_modules(path):
                if name.startswith(forbidden) or name in {f.rstrip(".") for f in forbidden}:
                    offenders.append(f"{path.relative_to(PACKAGE.parent)} imports {name}")
    assert offenders == []

"""The ACP registry entry kept in `registry/raven/`: what the registry's build checks of an
entry (its own schema, one version everywhere, a monochrome 16×16 icon)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema

from raven import __version__

ROOT = Path(__file__).parents[1]
ENTRY = ROOT / "registry" / "raven"


def test_the_entry_passes_the_registrys_own_schema() -> None:
    # registry/agent.schema.json is agentclientprotocol/registry's agent.schema.json (Apache-2.0)
    # as of 3de1678; its build validates every entry with it, draft 7, before any other check.
    schema = json.loads((ROOT / "registry" / "agent.schema.json").read_text())
    assert schema["$id"].endswith("/registry/v1/latest/agent.schema.json")
    agent = json.loads((ENTRY / "agent.json").read_text())
    jsonschema.Draft7Validator(schema).validate(agent)
    for broken in ({**agent, "id": "Raven"}, {**agent, "distribution": {"pip": {}}}):
        assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))  # the schema bites


def test_the_entry_names_this_version_and_the_distribution_people_install() -> None:
    agent = json.loads((ENTRY / "agent.json").read_text())
    assert {"id", "name", "version", "description", "distribution"} <= set(agent)
    assert re.fullmatch(r"[a-z][a-z0-9-]*", agent["id"]) and agent["id"] == ENTRY.name
    assert agent["name"] and agent["description"]
    assert agent["version"] == __version__
    distribution = json.loads((ENTRY / "agent.json").read_text())["distribution"]
    assert set(distribution) == {"uvx"}
    uvx = distribution["uvx"]
    assert set(uvx) <= {"package", "args", "env"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert uvx["package"] == f"{project['name']}@{__version__}"  # never @latest
    assert uvx["args"] == ["acp"]
    assert project["name"] in project["scripts"]  # `uvx <package>` runs the package's name
    assert agent["icon"] == "./icon.svg" and (ENTRY / "icon.svg").exists()


def test_the_icon_is_16_by_16_and_takes_the_editors_colour() -> None:
    svg = (ENTRY / "icon.svg").read_text()
    assert re.search(r'<svg[^>]*\swidth="16"', svg) and re.search(r'<svg[^>]*\sheight="16"', svg)
    assert 'viewBox="0 0 16 16"' in svg
    paints = re.findall(r'\b(?:fill|stroke)\s*[=:]\s*["\']?([^"\';\s>]+)', svg)
    assert paints and {p.lower() for p in paints} <= {"currentcolor", "none", "inherit"}
    assert "currentColor" in svg

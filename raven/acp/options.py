"""The session's model and mode as ACP `configOptions` and `modes`. Pure functions."""

from __future__ import annotations

from typing import Any

from raven.acp import protocol as p
from raven.config import ModelSpec, RavenConfig
from raven.engine import LiveSession
from raven.sandbox import LEVELS, capability

MODEL_OPTION = "model"
MODE_OPTION = "mode"


def selectable_models(config: RavenConfig, live: LiveSession) -> list[ModelSpec]:
    models = config.selectable_models()
    if all(m.id != live.model.id for m in models):
        models.insert(0, live.model)
    return models


def config_options(config: RavenConfig, live: LiveSession) -> list[dict[str, Any]]:
    options: list[dict[str, Any]] = [
        {
            "id": MODEL_OPTION,
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": live.model.id,
            "options": [
                {"value": m.id, "name": m.display_name} for m in selectable_models(config, live)
            ],
        }
    ]
    options.append(
        {
            "id": p.SANDBOX_OPTION,
            "name": "Sandbox",
            "type": "select",
            "currentValue": live.sandbox.level,
            "options": [{"value": level, "name": level.title()} for level in LEVELS],
        }
    )
    if config.modes and live.mode is not None:
        options.append(
            {
                "id": MODE_OPTION,
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": live.mode.id,
                "options": [_mode_value(m.id, m.name, m.description) for m in config.modes],
            }
        )
    return options


def modes_state(config: RavenConfig, live: LiveSession) -> dict[str, Any] | None:
    if not config.modes or live.mode is None:
        return None
    return {
        "currentModeId": live.mode.id,
        "availableModes": [
            {
                "id": m.id,
                "name": m.name,
                **({"description": m.description} if m.description else {}),
            }
            for m in config.modes
        ],
    }


def session_setup(config: RavenConfig, live: LiveSession) -> dict[str, Any]:
    """The `configOptions` and, when modes are declared, `modes` of a session response,
    with the project instructions the session read under `_meta.raven`."""
    result: dict[str, Any] = {"configOptions": config_options(config, live)}
    modes = modes_state(config, live)
    if modes is not None:
        result["modes"] = modes
    read = [str(path) for path in live.project.files]
    # ACP's sandbox RFD (a draft, not in the schema): what this machine can hold, and what
    # the session's commands run in.
    sandbox = {"capability": capability(), "policy": live.sandbox.stated}
    result["_meta"] = {"raven": {"projectInstructions": read}, "sandbox": sandbox}
    return result


def _mode_value(value: str, name: str, description: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {"value": value, "name": name}
    if description:
        item["description"] = description
    return item

"""Turn events as JSON for scripts (`raven run --output jsonl`): one object per event.

Names are the engine's event names; keys are camelCase; every object carries the
schema version. `docs/events.schema.json` declares the shape. Pure; never prints.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

SCHEMA = "raven.events/1"


def event_json(event: Any) -> dict[str, Any]:
    """`{"schema": ..., "type": <event name>, <its fields>}` for one turn event."""
    body: dict[str, Any] = {"schema": SCHEMA, "type": type(event).__name__}
    for f in dataclasses.fields(event):
        body[to_camel(f.name)] = _plain(getattr(event, f.name))
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {to_camel(f.name): _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def event_from_json(body: dict[str, Any]) -> Any:
    """The event `event_json` made `body` from; None for a type this Raven does not know.

    For faces that receive events over the wire (the terminal attached to a gateway).
    """
    from raven import engine
    from raven.tools import FileDiff, PlanStep

    cls = getattr(engine, str(body.get("type")), None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return None
    values = {f.name: body.get(to_camel(f.name)) for f in dataclasses.fields(cls)}
    if "locations" in values:
        values["locations"] = [Path(p) for p in values["locations"] or []]
    diff = values.get("diff")
    if isinstance(diff, dict):
        values["diff"] = FileDiff(Path(diff["path"]), diff.get("oldText"), diff["newText"])
    if "steps" in values:
        values["steps"] = tuple(PlanStep(**s) for s in values["steps"] or [])
    if "parts" in values:
        from pydantic import TypeAdapter

        from raven.messages import Part

        parts = TypeAdapter(list[Part]).validate_python(values["parts"] or [])
        values["parts"] = tuple(parts)
    if isinstance(approval := values.get("approval"), dict):
        values["approval"] = _approval(approval)
    if isinstance(asked := values.get("question"), dict):
        from raven.tools import Question

        values["question"] = Question(
            asked["text"],
            tuple(asked.get("choices") or ()),
            asked.get("callId", ""),
            asked.get("requestId", ""),
        )
    return cls(**values)


def _approval(body: dict[str, Any]) -> Any:
    from raven.engine import ApprovalRequest
    from raven.tools import FileDiff

    preview = body.get("preview")
    if isinstance(preview, dict):
        preview = FileDiff(Path(preview["path"]), preview.get("oldText"), preview["newText"])
    return ApprovalRequest(
        call_id=body["callId"],
        tool=body["tool"],
        title=body["title"],
        kind=body["kind"],
        raw_input=body.get("rawInput") or {},
        locations=[Path(p) for p in body.get("locations") or []],
        offered=tuple(body.get("offered") or ()),
        preview=preview,
        person=bool(body.get("person")),
        request_id=body.get("requestId", ""),
    )

"""Events as JSON, both ways, and the JSON Schema of what is written.

Every event a session's log holds (`TurnEvent` and `SessionEvent`, declared once in
`raven.engine.events`) is written as one object: its type's name, the schema version,
and its fields with camelCase keys. `raven run --output jsonl`, Raven RPC, the terminal
attached to a gateway and the log replicas share all use this codec.
`docs/events.schema.json` is `events_schema()`, generated from the events' own types
(`uv run python -m raven.compose.generated`, which also gives Raven RPC's document that
schema), and a test holds the two together. Pure; never prints.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, TypeAdapter
from pydantic.alias_generators import to_camel

from raven.engine.asker import ApprovalRequest
from raven.engine.events import SessionEvent, TurnEvent
from raven.messages import Part
from raven.tools import (
    ChildPlan,
    ChildPlanStep,
    ChildProgress,
    ChildSubagent,
    ChildText,
    ChildToolCall,
    FileDiff,
    PlanStep,
    Question,
)

SCHEMA = "raven.events/1"
LOGGED: tuple[type, ...] = tuple(dict.fromkeys((*get_args(TurnEvent), *get_args(SessionEvent))))
"""Every event a session's log holds, each once."""
_BY_NAME = {cls.__name__: cls for cls in LOGGED}


def event_json(event: Any) -> dict[str, Any]:
    """`{"schema": ..., "type": <event name>, <its fields>}` for one event."""
    kind = type(event)
    body: dict[str, Any] = {"schema": SCHEMA, "type": kind.__name__}
    for name, key in _FIELDS.get(kind) or _fields(kind):
        value = getattr(event, name)
        body[key] = value if type(value) in _PLAIN else plain(value)
    return body


_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _fields(kind: type) -> tuple[tuple[str, str], ...]:
    """An event type's fields, each with its JSON key, kept: asked for every event a face
    sends."""
    found = _FIELDS[kind] = tuple((f.name, to_camel(f.name)) for f in dataclasses.fields(kind))
    return found


_PLAIN = frozenset((str, int, float, bool, type(None)))


def event_from_json(body: dict[str, Any]) -> Any:
    """The event `event_json` made `body` from; None for a type this Raven does not know.

    For faces that receive events over the wire (the terminal attached to a gateway) and
    for the log replicas share."""
    cls = _BY_NAME.get(str(body.get("type")))
    if cls is None:
        return None
    values = {f.name: body.get(to_camel(f.name)) for f in dataclasses.fields(cls)}
    if "locations" in values:
        values["locations"] = [Path(p) for p in values["locations"] or []]
    if isinstance(diff := values.get("diff"), dict):
        values["diff"] = _diff(diff)
    if isinstance(detail := values.get("detail"), dict):
        values["detail"] = _child(detail)
    if "steps" in values:
        values["steps"] = tuple(PlanStep(**s) for s in values["steps"] or [])
    if "parts" in values:
        values["parts"] = tuple(_parts().validate_python(values["parts"] or []))
    if isinstance(approval := values.get("approval"), dict):
        values["approval"] = _approval(approval)
    if isinstance(asked := values.get("question"), dict):
        values["question"] = Question(
            asked["text"],
            tuple(asked.get("choices") or ()),
            asked.get("callId", ""),
            asked.get("requestId", ""),
        )
    return cls(**values)


def events_schema() -> dict[str, Any]:
    """The JSON Schema of every object `event_json` writes, from the events' types."""
    definitions: dict[str, Any] = {}
    for cls in LOGGED:
        schema = TypeAdapter(cls).json_schema(mode="serialization", ref_template="#/$defs/{model}")
        definitions.update(schema.pop("$defs", {}))
        definitions[cls.__name__] = schema
    for name, schema in definitions.items():
        _camel(schema)
        if name in _BY_NAME:
            schema["properties"] = {
                "schema": {"const": SCHEMA},
                "type": {"const": name},
                **schema.get("properties", {}),
            }
            schema["required"] = ["schema", "type", *schema.get("required", [])]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA,
        "title": "A Raven event, as `raven run --output jsonl` prints it and Raven RPC sends it",
        "oneOf": [{"$ref": f"#/$defs/{cls.__name__}"} for cls in LOGGED],
        "$defs": dict(sorted(definitions.items())),
    }


def _camel(schema: Any) -> None:
    """camelCase property names, as `event_json` writes them (pydantic models' aliases
    are camelCase already), without titles (the names say it)."""
    if isinstance(schema, dict):
        schema.pop("title", None)
        if isinstance(properties := schema.get("properties"), dict):
            schema["properties"] = {to_camel(k): v for k, v in properties.items()}
            for value in schema["properties"].values():
                _camel(value)
        if isinstance(required := schema.get("required"), list):
            schema["required"] = [to_camel(k) for k in required]
        for key, value in schema.items():
            if key != "properties":
                _camel(value)
    elif isinstance(schema, list):
        for value in schema:
            _camel(value)


def plain(value: Any) -> Any:
    """`value` as JSON takes it: camelCase keys for dataclasses, pydantic models by their
    aliases, paths as text."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {to_camel(f.name): plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _child(body: dict[str, Any]) -> ChildProgress | None:
    agent, within = str(body.get("agent", "")), body.get("subagent")
    if "state" in body:
        stop_reason, described = body.get("stopReason"), body.get("description")
        cancellable = body.get("cancellable")
        return ChildSubagent(agent, str(within), body["state"], stop_reason, described, cancellable)
    if "toolCallId" in body:
        call_id, title = body["toolCallId"], body.get("title", "")
        return ChildToolCall(agent, call_id, title, body.get("status"), body.get("kind"), within)
    if "plan" in body:
        steps = tuple(ChildPlanStep(s["content"], s["status"]) for s in body["plan"] or [])
        return ChildPlan(agent, steps, within)
    if "delta" in body or "text" in body:
        return ChildText(agent, body.get("text", ""), body.get("delta", ""), within)
    return None


@functools.cache
def _parts() -> TypeAdapter[list[Part]]:
    return TypeAdapter(list[Part])


def _diff(body: dict[str, Any]) -> FileDiff:
    return FileDiff(Path(body["path"]), body.get("oldText"), body["newText"])


def _approval(body: dict[str, Any]) -> ApprovalRequest:
    preview = body.get("preview")
    return ApprovalRequest(
        call_id=body["callId"],
        tool=body["tool"],
        title=body["title"],
        kind=body["kind"],
        raw_input=body.get("rawInput") or {},
        locations=[Path(p) for p in body.get("locations") or []],
        offered=tuple(body.get("offered") or ()),
        preview=_diff(preview) if isinstance(preview, dict) else preview,
        person=bool(body.get("person")),
        request_id=body.get("requestId", ""),
    )

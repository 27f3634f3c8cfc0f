"""`to_json` agrees with protobuf's own `MessageToDict` on every A2A message type, filled
in every field (each oneof choice in turn, every scalar kind, Struct and Value of every
kind, timestamps, bytes, enums), except that whole numbers in a Value stay integers; and
`from_json` with `ParseDict` on the JSON of those messages, spelled either way, and on
JSON that is wrong in every way a request can be (the same message, or the same error)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from a2a import types as a2a_types
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict, SerializeToJsonError
from google.protobuf.message import Message

from raven.a2a.wire import from_json, to_json

MESSAGE_TYPES = sorted(
    (
        value
        for value in vars(a2a_types).values()
        if isinstance(value, type) and issubclass(value, Message) and value is not Message
    ),
    key=lambda kind: kind.DESCRIPTOR.full_name,
)


def whole_floats_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_floats_as_ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_floats_as_ints(v) for v in value]
    return value


def json_value(rng: random.Random, depth: int) -> Any:
    kinds = ["str", "int", "float", "bool", "null"] + (["obj", "list"] if depth < 3 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return rng.choice(["", "é ☃", "text", "1"])
    if kind == "int":
        return rng.choice([0, 1, -7, 2**40])
    if kind == "float":
        return rng.choice([0.5, -2.25, 1e-9])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "null":
        return None
    if kind == "obj":
        return {f"k{i}": json_value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def fill(message: Message, rng: random.Random, depth: int = 0) -> None:
    """Set fields of `message` at random: one choice of each oneof, every other field."""
    descriptor: Descriptor = message.DESCRIPTOR
    chosen = {o.name: rng.choice(o.fields).name for o in descriptor.oneofs}
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and chosen[oneof.name] != field.name:
            continue
        if rng.random() < 0.15:
            continue  # left unset
        set_field(message, field, rng, depth)


def set_field(message: Message, field: FieldDescriptor, rng: random.Random, depth: int) -> None:
    repeated = field.is_repeated
    kind = field.message_type
    if kind is not None and kind.GetOptions().map_entry:
        target = getattr(message, field.name)
        for i in range(rng.randint(1, 2)):
            key_field, value_field = kind.fields_by_name["key"], kind.fields_by_name["value"]
            string_keys = key_field.type == FieldDescriptor.TYPE_STRING
            key = f"k{i}" if string_keys else scalar(key_field, rng)
            if value_field.message_type is not None:
                fill(target[key], rng, depth + 1)
            else:
                target[key] = scalar(value_field, rng)
        return
    if kind is not None:
        if depth > 3:
            return
        if kind.full_name.startswith("google.protobuf."):
            filled = well_known(kind.full_name, rng)
            if filled is None:
                return
            if repeated:
                getattr(message, field.name).add().CopyFrom(filled)
            else:
                getattr(message, field.name).CopyFrom(filled)
            return
        if repeated:
            for _ in range(rng.randint(1, 2)):
                fill(getattr(message, field.name).add(), rng, depth + 1)
        else:
            target = getattr(message, field.name)
            target.SetInParent()
            fill(target, rng, depth + 1)
        return
    if repeated:
        getattr(message, field.name).extend(scalar(field, rng) for _ in range(2))
    else:
        setattr(message, field.name, scalar(field, rng))


def scalar(field: FieldDescriptor, rng: random.Random) -> Any:
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        return rng.choice(field.enum_type.values).number
    if field.type == FieldDescriptor.TYPE_BYTES:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
    if field.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        return rng.choice(["", "id-1", "ünïcode", "a b"])
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return rng.choice([True, False])
    if field.cpp_type in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        return rng.choice([0.0, 1.5, -3.0])
    return rng.choice([0, 1, 42, 2**31 - 1])


def well_known(name: str, rng: random.Random) -> Message | None:
    from google.protobuf import struct_pb2, timestamp_pb2

    if name == "google.protobuf.Struct":
        return ParseDict({"a": json_value(rng, 1), "b": json_value(rng, 1)}, struct_pb2.Struct())
    if name == "google.protobuf.Value":
        return ParseDict(json_value(rng, 0), struct_pb2.Value())
    if name == "google.protobuf.Timestamp":
        stamp = timestamp_pb2.Timestamp()
        stamp.FromJsonString(
            rng.choice(["2026-12-01T17:49:35Z", "2026-12-01T17:49:35.120Z", "1970-01-01T00:00:00Z"])
        )
        return stamp
    return None


@pytest.mark.parametrize("kind", MESSAGE_TYPES, ids=lambda kind: kind.DESCRIPTOR.name)
def test_every_a2a_message_converts_as_json_format_does(kind: type[Message]) -> None:
    rng = random.Random(kind.DESCRIPTOR.full_name)
    assert to_json(kind()) == MessageToDict(kind())  # all defaults: nothing shown
    every = MessageToDict(kind(), always_print_fields_with_no_presence=True)
    assert to_json(kind(), every_field=True) == every
    for _ in range(40):
        message = kind()
        fill(message, rng)
        assert to_json(message) == whole_floats_as_ints(MessageToDict(message))
        every = MessageToDict(message, always_print_fields_with_no_presence=True)
        assert to_json(message, every_field=True) == whole_floats_as_ints(every)


def test_a_data_parts_numbers_come_back_as_sent() -> None:
    part = ParseDict({"data": {"z": 1, "a": [2, 2.5, {"n": -0.0}], "m": None}}, a2a_types.Part())
    out = to_json(part)
    assert out == {"data": {"z": 1, "a": [2, 2.5, {"n": 0}], "m": None}}
    assert isinstance(out["data"]["z"], int) and isinstance(out["data"]["a"][1], float)


def test_a_number_json_cannot_hold_is_refused_as_json_format_refuses_it() -> None:
    part = a2a_types.Part()
    part.data.number_value = float("nan")
    with pytest.raises(SerializeToJsonError):
        MessageToDict(part)
    with pytest.raises(ValueError):
        to_json(part)


def mutations(value: Any, rng: random.Random) -> list[Any]:
    """`value` (a message's JSON) changed in one place each: a field set to a wrong type,
    to null or to an unknown enum name, spelled by its proto name, doubled, unknown."""
    if not isinstance(value, dict) or not value:
        return []
    out: list[Any] = []
    for key in value:
        for wrong in (None, 1, 1.5, True, "x", "\ud800", [], {}, [None], 2**70, "TASK_STATE_NOPE"):
            out.append({**value, key: wrong})
        snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
        out.append({**{k: v for k, v in value.items() if k != key}, snake: value[key]})
        out.append({**value, snake: value[key]})
        for inner in mutations(value[key], rng)[:6]:
            out.append({**value, key: inner})
        if isinstance(value[key], list) and value[key]:
            for inner in mutations(value[key][0], rng)[:6]:
                out.append({**value, key: [inner, *value[key][1:]]})
    out.append({**value, "unknownField": 1, "[ext.name]": 2})
    return out


def parsed(value: Any, kind: type[Message], parse: Any) -> Message | str:
    try:
        if parse is ParseDict:
            return ParseDict(value, kind(), ignore_unknown_fields=True)
        return parse(value, kind())
    except Exception as exc:  # the same error, with the same words
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("kind", MESSAGE_TYPES, ids=lambda kind: kind.DESCRIPTOR.name)
def test_every_a2a_message_is_read_as_json_format_reads_it(kind: type[Message]) -> None:
    rng = random.Random("from " + kind.DESCRIPTOR.full_name)
    for _ in range(15):
        message = kind()
        fill(message, rng)
        sent = MessageToDict(message)
        assert parsed(sent, kind, from_json) == message
        snake = MessageToDict(message, preserving_proto_field_name=True)
        assert parsed(snake, kind, from_json) == parsed(snake, kind, ParseDict)
        for wrong in mutations(sent, rng):
            assert parsed(wrong, kind, from_json) == parsed(wrong, kind, ParseDict), wrong
    assert parsed([], kind, from_json) == parsed([], kind, ParseDict)


def test_a_plain_request_is_read_without_json_format(monkeypatch: pytest.MonkeyPatch) -> None:
    import raven.a2a.wire as wire

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("json_format was used")

    monkeypatch.setattr(wire, "ParseDict", refuse)
    request = {
        "message": {
            "messageId": "m1",
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}, {"url": "https://example.com/a.txt", "filename": "a"}],
            "contextId": "c1",
            "referenceTaskIds": ["t0"],
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3},
    }
    read = from_json(request, a2a_types.SendMessageRequest())
    monkeypatch.undo()
    assert read == ParseDict(request, a2a_types.SendMessageRequest())

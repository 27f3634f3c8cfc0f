"""A2A protobuf messages to and from JSON-ready values, fast: the proto3 JSON mapping of
`google.protobuf.json_format` (`MessageToDict`, `ParseDict`), with one converter per
field made once from its descriptor (json_format works each field out again on every
call: a third of a millisecond for one task, a tenth to read a short request).

`from_json` reads what requests carry (strings, enum names, booleans, whole numbers,
nested and repeated messages) itself and leaves anything else (a null, bytes, a float,
a map, a well-known type such as Struct, a field given twice, an unknown enum name) to
`ParseDict`, whole: the message it makes, and the error it raises, are json_format's.

It agrees with `MessageToDict(message)` (default options) on every message, except
that a whole number in a `google.protobuf.Value` comes out as an int: a data part's
JSON is held in a Struct, which keeps every number as a double, and a peer that sent
`1` must get `1` back, not `1.0`. A message type with a field it has no converter of
its own for (Any, extensions, floats, enums with JSON names of their own) goes to
json_format whole.
Never changes a message.
"""

from __future__ import annotations

import base64
import functools
import math
import re
from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message

Convert = Callable[[Any], Any]

_TO_STRING = frozenset({"google.protobuf.Timestamp", "google.protobuf.Duration"})
_WRAPPERS = frozenset(
    f"google.protobuf.{name}Value"
    for name in ("Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
_PLAIN_SCALARS = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT64,
        FieldDescriptor.CPPTYPE_BOOL,
        FieldDescriptor.CPPTYPE_STRING,
        FieldDescriptor.CPPTYPE_ENUM,
    }
)
_INT64 = frozenset({FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64})

_messages: dict[tuple[str, bool], Convert] = {}
"""(Message type's full name, every field) → its converter, made on first use."""
_INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def to_json(message: Message, every_field: bool = False) -> Any:
    """`message` in its proto3 JSON form (a dict for all but the well-known types); with
    `every_field`, fields without presence are shown at their defaults too (json_format's
    `always_print_fields_with_no_presence`)."""
    return _message(message.DESCRIPTOR, every_field)(message)


def _message(descriptor: Descriptor, every: bool) -> Convert:
    key = (descriptor.full_name, every)
    convert = _messages.get(key)
    if convert is None:
        convert = _messages[key] = _message_converter(descriptor, every)
    return convert


def _message_converter(descriptor: Descriptor, every: bool) -> Convert:
    name = descriptor.full_name
    if name == "google.protobuf.Struct":
        return _struct
    if name == "google.protobuf.Value":
        return _value
    if name == "google.protobuf.ListValue":
        return _list_value
    if name in _TO_STRING:
        return lambda message: message.ToJsonString()
    if name in _WRAPPERS:
        inner = _scalar(descriptor.fields_by_name["value"])
        return lambda message: inner(message.value)
    if name.startswith("google.protobuf.") or not all(map(_plain, descriptor.fields)):
        # Any, FieldMask, extensions, floats, enums with JSON names of their own: as
        # json_format does them.
        return lambda message: MessageToDict(message, always_print_fields_with_no_presence=every)
    plan: dict[int, tuple[str, Convert]] = {}
    defaults: list[tuple[str, Callable[[], Any]]] = []

    def regular(message: Message) -> dict[str, Any]:
        if not plan:  # made on first use: message types may refer to each other
            for field in descriptor.fields:
                plan[field.number] = (field.json_name, _field_converter(field, every))
            if every:
                defaults.extend(_defaults(descriptor))
        out = {}
        for field, value in message.ListFields():
            key, convert = plan[field.number]
            out[key] = convert(value)
        for key, default in defaults:
            if key not in out:
                out[key] = default()
        return out

    return regular


def _defaults(descriptor: Descriptor) -> list[tuple[str, Callable[[], Any]]]:
    """The fields without presence, each with a maker of its JSON when unset."""
    made: list[tuple[str, Callable[[], Any]]] = []
    for field in descriptor.fields:
        if field.has_presence:
            continue
        if _repeated(field):
            map_entry = field.message_type is not None and field.message_type.GetOptions().map_entry
            made.append((field.json_name, dict if map_entry else list))
        else:
            made.append(
                (field.json_name, functools.partial(_same, _scalar(field)(field.default_value)))
            )
    return made


def _repeated(field: FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:  # protobuf before 6.31
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
    return bool(repeated)


def _plain(field: FieldDescriptor) -> bool:
    """Whether a field is one this module converts itself."""
    if field.is_extension:
        return False
    entry = field.message_type
    if entry is not None:
        return not entry.GetOptions().map_entry or _plain(entry.fields_by_name["value"])
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        enum = field.enum_type
        return not enum.is_closed and not any(v.GetOptions().ListFields() for v in enum.values)
    return field.cpp_type in _PLAIN_SCALARS


def _field_converter(field: FieldDescriptor, every: bool) -> Convert:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key = _map_key(entry.fields_by_name["key"])
        value = _single(entry.fields_by_name["value"], every)
        return lambda entries: {key(k): value(v) for k, v in entries.items()}
    one = _single(field, every)
    if _repeated(field):
        # A slice, not the container: iterating a upb repeated field ends in an IndexError
        # (made, message and all, once a field).
        return lambda values: [one(v) for v in values[:]]
    return one


def _single(field: FieldDescriptor, every: bool) -> Convert:
    if field.message_type is not None:
        kind = field.message_type
        return lambda message: _message(kind, every)(message)  # late: types may recurse
    return _scalar(field)


def _map_key(field: FieldDescriptor) -> Convert:
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return lambda key: "true" if key else "false"
    return str


def _scalar(field: FieldDescriptor) -> Convert:
    kind = field.cpp_type
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        if field.enum_type.full_name == "google.protobuf.NullValue":
            return lambda _: None
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda value: names.get(value, value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode("utf-8")
    if kind == FieldDescriptor.CPPTYPE_STRING or kind in _INT64:
        return str
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        return bool
    return _same


def _same(value: Any) -> Any:
    return value


def _struct(message: Any) -> dict[str, Any]:
    return {key: _value(value) for key, value in message.fields.items()}


def _list_value(message: Any) -> list[Any]:
    return [_value(value) for value in message.values[:]]


def _value(message: Any) -> Any:
    which = message.WhichOneof("kind")
    if which == "string_value":
        return message.string_value
    if which == "number_value":
        number = message.number_value
        if not math.isfinite(number):
            raise ValueError(f"Fail to serialize {number} for Value.number_value")
        return int(number) if number.is_integer() else number
    if which == "bool_value":
        return message.bool_value
    if which == "struct_value":
        return _struct(message.struct_value)
    if which == "list_value":
        return _list_value(message.list_value)
    return None


class _Unsure(Exception):
    """`from_json` met something it leaves to json_format."""


Fill = Callable[[Message, str, Any], None]
_plans: dict[str, dict[str, tuple[str, str | None, Fill]]] = {}
"""Message type's full name → each JSON key (json name and field name) → the field's name,
its oneof's, and what sets it from a JSON value."""


def from_json(value: Any, message: Message) -> Message:
    """`ParseDict(value, message, ignore_unknown_fields=True)` into an empty `message`."""
    try:
        _fill(value, message)
    except _Unsure:
        message.Clear()
        ParseDict(value, message, ignore_unknown_fields=True)
    return message


def _fill(value: Any, message: Message) -> None:
    if type(value) is not dict:
        raise _Unsure
    plan = _plan(message.DESCRIPTOR)
    seen: set[str] = set()
    for key, item in value.items():
        entry = plan.get(key)
        if entry is None:
            if key.startswith("["):
                raise _Unsure  # an extension's name
            continue  # unknown: ignored
        name, oneof, setter = entry
        if item is None or name in seen:
            raise _Unsure
        seen.add(name)
        if oneof is not None:
            if "\0" + oneof in seen:
                raise _Unsure
            seen.add("\0" + oneof)
        setter(message, name, item)


def _plan(descriptor: Descriptor) -> dict[str, tuple[str, str | None, Fill]]:
    plan = _plans.get(descriptor.full_name)
    if plan is None:
        if descriptor.full_name.startswith("google.protobuf."):
            raise _Unsure  # well-known types have JSON forms of their own
        plan = {}
        for field in descriptor.fields:
            oneof = field.containing_oneof
            entry = (field.name, oneof.name if oneof is not None else None, _setter(field))
            plan[field.json_name] = plan[field.name] = entry
        _plans[descriptor.full_name] = plan
    return plan


def _setter(field: FieldDescriptor) -> Fill:
    entry = field.message_type
    if field.is_extension or (entry is not None and entry.GetOptions().map_entry):
        return _unsure
    if entry is not None:
        if _repeated(field):
            return _repeated_messages
        return _one_message
    scalar = _scalar_reader(field)
    if _repeated(field):

        def repeated(message: Message, name: str, value: Any) -> None:
            if type(value) is not list:
                raise _Unsure
            getattr(message, name).extend([scalar(item) for item in value])

        return repeated

    def single(message: Message, name: str, value: Any) -> None:
        setattr(message, name, scalar(value))

    return single


def _unsure(message: Message, name: str, value: Any) -> None:
    raise _Unsure


def _one_message(message: Message, name: str, value: Any) -> None:
    inner = getattr(message, name)
    inner.SetInParent()
    _fill(value, inner)


def _repeated_messages(message: Message, name: str, value: Any) -> None:
    if type(value) is not list:
        raise _Unsure
    items = getattr(message, name)
    for item in value:
        _fill(item, items.add())


def _scalar_reader(field: FieldDescriptor) -> Convert:
    """The field's value from a JSON value, or `_Unsure`."""
    kind = field.cpp_type
    if kind == FieldDescriptor.CPPTYPE_STRING and field.type != FieldDescriptor.TYPE_BYTES:

        def text(value: Any) -> Any:
            if type(value) is not str or (not value.isascii() and _SURROGATE.search(value)):
                raise _Unsure
            return value

        return text
    if kind == FieldDescriptor.CPPTYPE_BOOL:

        def boolean(value: Any) -> Any:
            if type(value) is not bool:
                raise _Unsure
            return value

        return boolean
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        numbers = {v.name: v.number for v in field.enum_type.values}

        def enum(value: Any) -> Any:
            number = numbers.get(value) if type(value) is str else None
            if number is None:
                raise _Unsure
            return number

        return enum
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]

        def whole(value: Any) -> Any:
            if type(value) is not int or not low <= value <= high:
                raise _Unsure
            return value

        return whole
    return _unsure_scalar


def _unsure_scalar(value: Any) -> Any:
    raise _Unsure

"""The protocol reference in docs/daemon.md, rendered from the vocabulary so the two cannot
drift: `python -m logwatch.daemon.protocol.reference docs/daemon.md` rewrites the part between
the markers, and a test fails while it is not current."""

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, is_typeddict

from logwatch.daemon.protocol.base import OPERATORS, PROTOCOL_VERSION, READERS
from logwatch.daemon.protocol.events import ENVELOPE, EVENTS
from logwatch.daemon.protocol.requests import REQUESTS, ErrorAnswer, parameters

BEGIN = ("<!-- protocol reference: generated from logwatch/daemon/protocol by `python -m "
         "logwatch.daemon.protocol.reference docs/daemon.md`; edit the vocabulary, not this -->")
END = "<!-- end of the protocol reference -->"
NAMES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                         type(None): "null", Any: "any"}


def type_text(hint: Any, objects: dict[str, Any]) -> str:
    """A type as the reference writes it; TypedDicts met are added to `objects`."""
    if hint in NAMES:
        return NAMES[hint]
    if is_typeddict(hint):
        name: str = hint.__name__
        objects[name] = hint
        return name
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in args)
    if origin in (types.UnionType, typing.Union):
        return " \\| ".join(type_text(arg, objects) for arg in args)
    if origin is list:
        return f"[{type_text(args[0], objects)}]"
    if origin is dict:
        return f"{{{type_text(args[0], objects)}: {type_text(args[1], objects)}}}"
    return getattr(hint, "__name__", str(hint))


def _default(value: Any) -> str:
    return json.dumps(value)  # null, false, 0, "x": as on the wire


def _keys(shape: Any, objects: dict[str, Any]) -> str:
    """A TypedDict's keys and their types; optional ones marked `?`."""
    hints = typing.get_type_hints(shape)
    return ", ".join(f"`{key}`{'?' if key in shape.__optional_keys__ else ''}: "
                     f"{type_text(hint, objects)}" for key, hint in hints.items())


def _summary(cls: Any) -> str:
    return " ".join((cls.__doc__ or "").split())


def _fields(cls: Any, fields: Any, objects: dict[str, Any]) -> str:
    """`name`: type = default, ... for the given dataclass fields of `cls`."""
    hints = typing.get_type_hints(cls)
    return ", ".join(
        f"`{f.name}`: {type_text(hints[f.name], objects)}"
        + ("" if f.default is dataclasses.MISSING else f" = {_default(f.default)}")
        for f in fields)


# who may ask, as the reference says it (docs/security.md explains the three kinds of peer)
WHO = {READERS: "readers", OPERATORS: "operators"}


def requests_table(objects: dict[str, Any]) -> list[str]:
    rows = ["| op | parameters | answer | who may | what it does |",
            "| --- | --- | --- | --- | --- |"]
    for op, cls in REQUESTS.items():
        params = _fields(cls, [f for f in parameters(cls) if f.name != "db"], objects)
        rows.append(f"| `{op}` | {params or '—'} | {_keys(cls.answer, objects)} "
                    f"| {WHO[cls.who]} | {_summary(cls)} |")
    return rows


def events_table(objects: dict[str, Any]) -> list[str]:
    rows = ["| event | fields | when |", "| --- | --- | --- |"]
    for kind, cls in EVENTS.items():
        fields = _fields(cls, [f for f in dataclasses.fields(cls) if f.name not in ENVELOPE],
                         objects)
        rows.append(f"| `{kind}` | {fields} | {_summary(cls)} |")
    return rows


def objects_table(objects: dict[str, Any]) -> list[str]:
    rows = ["| object | keys |", "| --- | --- |"]
    done: set[str] = set()
    while len(done) < len(objects):  # an object's keys may name further objects
        for name in sorted(set(objects) - done):
            rows.append(f"| `{name}` | {_keys(objects[name], objects)} |")
            done.add(name)
    return rows


def render() -> str:
    objects: dict[str, Any] = {}
    requests, events = requests_table(objects), events_table(objects)
    lines = [
        BEGIN, "",
        f"Protocol version {PROTOCOL_VERSION}. Requests (each may also name the database it "
        "means, `\"db\": \"/path\"`: a daemon holding another one refuses with "
        "`\"other_db\": true`). An error is answered as "
        f"{{{_keys(ErrorAnswer, objects)}}}. Who may ask each: *operators* are root, the "
        "user the daemon runs as and members of `socket.operators_group`; *readers* are "
        "those and members of `socket.group` (docs/security.md).", "",
        *requests, "",
        "Events on a subscription (each also carries `event`, its kind, and `dropped_before` "
        "after events were dropped for this subscriber; a field with a default may be left "
        "out by the publisher and is sent at its default):", "",
        *events, "",
        "Objects in the answers and events (`?`: present only when it applies):", "",
        *objects_table(objects), "",
        END,
    ]
    return "\n".join(lines)


def replace_block(text: str) -> str:
    """`text` with the part between the markers (markers included) rendered anew."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + render() + text[end:]


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m logwatch.daemon.protocol.reference docs/daemon.md",
              file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(replace_block(path.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

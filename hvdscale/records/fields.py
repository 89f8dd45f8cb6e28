"""How a record kind says what it holds: each field's type, unit, meaning and writer, in one place.

A record kind is a dataclass deriving from ``Record``; each field is annotated
``Annotated[type, Doc("what it is", unit="s", writer="core/meter.py")]``. A nested section is a
``TypedDict`` whose keys are annotated the same way. From these declarations come the checks a
file is read with (``Record.from_dict`` names the field that is wrong), the generated
docs/records.md and the JSON Schema (``hvdscale.records.docs``), so none can drift from the
code. A writer builds the record with ``Record.assemble``, which refuses a field set by two
writers (the ``loadavg`` that the meter once silently overwrote).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
)

from hvdscale.errors import RecordError


@dataclass(frozen=True)
class Doc:
    """A field's meaning, its unit ("" where it has none) and the code that writes it."""

    text: str
    unit: str = ""
    writer: str = ""


def doc_of(annotation: Any) -> tuple[Any, Doc | None]:
    """(the bare type, its ``Doc``) of an ``Annotated`` annotation; (annotation, None) else."""
    if get_origin(annotation) in (NotRequired, Required):  # a section's optional key
        annotation = get_args(annotation)[0]
    if get_origin(annotation) is Annotated:
        bare, *meta = get_args(annotation)
        return bare, next((m for m in meta if isinstance(m, Doc)), None)
    return annotation, None


@functools.cache  # resolving annotations is the slow part of reading a record; types are fixed
def hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a record or section type, with their ``Annotated`` docs."""
    return typing.get_type_hints(cls, include_extras=True)


def is_section(tp: Any) -> bool:
    """A ``TypedDict`` section type."""
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


@functools.cache
def required_keys(tp: type) -> tuple[str, ...]:
    """A section's keys a file must hold (``NotRequired`` and a ``total=False`` class's keys
    are optional; worked out from the hints, which postponed annotations keep intact)."""
    total = getattr(tp, "__total__", True)
    return tuple(k for k, h in hints(tp).items()
                 if get_origin(h) is Required or (total and get_origin(h) is not NotRequired))


def _name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _check_union(value: Any, options: tuple, where: str) -> None:
    errors = []
    for opt in options:
        try:
            check(value, opt, where)
            return
        except RecordError as e:
            errors.append(e)
    if value is not None and len(options) == 2 and type(None) in options:
        raise errors[options.index(next(o for o in options if o is not type(None)))]
    names = " or ".join(_name(o) for o in options)
    raise RecordError(f"{where} should be {names}, got {type(value).__name__} {value!r:.60}")


def _check_section(value: Any, tp: type, where: str) -> None:
    if not isinstance(value, dict):
        raise RecordError(f"{where} should be an object ({_name(tp)}), got "
                          f"{type(value).__name__}")
    fields = hints(tp)
    for k in required_keys(tp):
        if k not in value:
            raise RecordError(f"{where}.{k} is missing")
    for k, v in value.items():
        if k in fields:
            check(v, doc_of(fields[k])[0], f"{where}.{k}")


def check(value: Any, annotation: Any, where: str) -> None:
    """Raise ``RecordError`` naming ``where`` unless ``value`` is of the declared type.

    Sections are checked key by key; keys a section does not declare are allowed (a strategy's
    or a framework's own facts), the declared ones must have their types.
    """
    tp = doc_of(annotation)[0]
    origin = get_origin(tp)
    if tp is Any:
        return
    if origin in (Union, types.UnionType):
        return _check_union(value, get_args(tp), where)
    if origin is Literal:
        if value not in get_args(tp):
            raise RecordError(f"{where} should be one of {list(get_args(tp))}, got {value!r}")
        return
    if tp is type(None):
        if value is not None:
            raise RecordError(f"{where} should be null, got {type(value).__name__}")
        return
    if is_section(tp):
        return _check_section(value, tp, where)
    if origin is list:
        if not isinstance(value, list | tuple):  # a writer's tuple is a JSON list
            raise RecordError(f"{where} should be a list, got {type(value).__name__}")
        (item,) = get_args(tp) or (Any,)
        for i, v in enumerate(value):
            check(v, item, f"{where}[{i}]")
        return
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise RecordError(f"{where} should be an object, got {type(value).__name__}")
        return
    _check_scalar(value, tp, where)


def _check_scalar(value: Any, tp: Any, where: str) -> None:
    # JSON has one number type: an int is a fine float; a bool is no number.
    ok = {float: (int, float), int: (int,), str: (str,), bool: (bool,)}.get(tp, (tp,))
    if (isinstance(value, bool) and tp is not bool) or not isinstance(value, ok):
        raise RecordError(f"{where} should be {_name(tp)}, got {type(value).__name__} "
                          f"{value!r:.60}")


class Record:
    """A record kind's base: its ``kind``, reading with checks, writing, and assembling.

    Subclasses are dataclasses whose fields are ``Annotated`` with a ``Doc``; a field with a
    default is optional in a file (older writers left it out).
    """

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line for docs/records.md

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        """Each field's annotation (with its ``Doc``), in declaration order."""
        all_hints = hints(cls)
        return {f.name: all_hints[f.name] for f in dataclasses.fields(cls)}  # type: ignore[arg-type]

    @classmethod
    def required_fields(cls) -> list[str]:
        """The fields every file of this kind holds (those without a default)."""
        return [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> Record:
        """The typed record of ``data`` (a file's JSON object, migrated to the current version).

        Raises:
            RecordError: a required field is missing, a field has the wrong type, or the object
                has a field the kind does not declare; the message names it and ``where``.
        """
        types_ = cls.field_types()
        required = set(cls.required_fields())
        unknown = sorted(set(data) - set(types_) - {"kind", "schema"})
        if unknown:
            raise RecordError(f"{where}: field {unknown[0]!r} is not one a {cls.kind} record "
                              f"holds (docs/records.md lists them)")
        missing = sorted(required - set(data))
        if missing:
            raise RecordError(f"{where}: field {missing[0]!r} of a {cls.kind} record is missing")
        for name, value in data.items():
            if name in types_:
                check(value, types_[name], f"{where}: field {name!r}")
        return cls(**{k: v for k, v in data.items() if k in types_})

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object a file holds: its version and kind, then its fields
        (an optional one only when set)."""
        from hvdscale.records.migrate import SCHEMA_VERSION

        out: dict[str, Any] = {"schema": SCHEMA_VERSION, "kind": self.kind}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            # An optional field left unset stays out of the file: absent means "not measured".
            if value is None and f.default is None:
                continue
            out[f.name] = value
        return out

    @classmethod
    def assemble(cls, parts: Mapping[str, Mapping[str, Any]]) -> Record:
        """The record from its writers' parts (writer name -> the fields it sets).

        Raises:
            RecordError: two writers set one field (the message names it and both), or a
                writer set a field the kind does not declare.
        """
        fields: dict[str, Any] = {}
        by: dict[str, str] = {}
        for writer, part in parts.items():
            for name, value in part.items():
                if name in fields:
                    raise RecordError(f"field {name!r} of the {cls.kind} record is written by "
                                      f"both {by[name]} and {writer}; each field has one writer")
                fields[name], by[name] = value, writer
        return cls.from_dict(fields, where=f"the {cls.kind} record being written")

    def fill(self, **later: Any) -> None:
        """Set fields a later phase of the run knows (start-up, quality, interval): each once.

        Raises:
            RecordError: the field is already set.
        """
        types_ = self.field_types()
        for name, value in later.items():
            if name not in types_:
                raise RecordError(f"a {self.kind} record has no field {name!r}")
            if getattr(self, name) is not None:
                raise RecordError(f"field {name!r} of the {self.kind} record is already set; "
                                  "each field has one writer")
            check(value, types_[name], f"field {name!r}")
            setattr(self, name, value)

"""How a record kind says what it holds: each field's type, unit, meaning and writer, in one place.

A record kind is a ``msgspec.Struct`` deriving from ``Record`` with its ``kind`` as the tag
(``class RunRecord(Record, tag="run", kw_only=True)``); each field is annotated
``Annotated[type, Doc("what it is", unit="s", writer="core/meter.py")]``. A nested section is a
``Section`` declared the same way. msgspec holds a file to these declarations (``from_dict``
names the field that is wrong) and writes the JSON Schema that docs/records.md is generated from
(``hvdscale.records.docs``), so none can drift from the code. A writer builds the record with
``Record.assemble``, which refuses a field set by two writers (the ``loadavg`` that the meter
once silently overwrote).

Compatibility (docs/records.md): a top-level field this hvdscale does not declare is ignored,
with one note per kind and field on stderr; a section's undeclared keys are ignored.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Mapping
from typing import Any, ClassVar

import msgspec

from hvdscale.errors import HvdscaleError, RecordError

UNSET = msgspec.UNSET
"""A section's optional key that a file left out (it stays out when written back)."""


def Doc(text: str, unit: str = "", writer: str = "") -> msgspec.Meta:
    """A field's meaning, its unit ("" where it has none) and the code that writes it; the
    JSON Schema carries the unit and writer as ``x-unit`` and ``x-writer``."""
    extra = {k: v for k, v in (("x-unit", unit), ("x-writer", writer)) if v}
    return msgspec.Meta(description=text, extra_json_schema=extra or None)


def loads(text: str | bytes) -> Any:
    """A record's JSON: msgspec's decoder (several times the standard library's speed), and
    the standard library's for the NaN a run's words/s can be (msgspec refuses that literal).

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``).
    """
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


class Section(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A nested object of a record, read as attributes (``rec.step_time.median``); an optional
    key a file left out is UNSET."""

    def present(self) -> list[str]:
        """The keys a file holds (those not UNSET)."""
        return [k for k in self.__struct_fields__ if getattr(self, k) is not UNSET]


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def _field_error(e: msgspec.ValidationError, where: str, kind: str) -> RecordError:
    """msgspec's message in this project's shape: the file and line, then the dotted field."""
    m = _AT.match(str(e))
    msg, path = (m["msg"], (m["path"] or "").lstrip(".")) if m else (str(e), "")
    if got := re.match(r"Object missing required field `(.+)`", msg):
        name = f"{path}.{got[1]}" if path else got[1]
        return RecordError(f"{where}: field {name!r} of a {kind} record is missing")
    if got := re.match(r"Expected `(.+)`, got `(.+)`", msg):
        return RecordError(f"{where}: field {path!r} should be {got[1]}, got {got[2]}")
    return RecordError(f"{where}: field {path!r}: {msg[0].lower()}{msg[1:]}")


_noted: set[tuple[str, str]] = set()


def _note_unknown(cls: type[Record], data: Mapping[str, Any], where: str) -> None:
    """One line on stderr per kind and field this hvdscale does not know (the rule: ignored)."""
    for name in sorted(set(data) - cls.field_names() - {"kind", "schema"}):
        if (cls.kind, name) not in _noted:
            _noted.add((cls.kind, name))
            sys.stderr.write(f"hvdscale: note: {where}: field {name!r} is not one this "
                             f"hvdscale's {cls.kind} record knows (a newer hvdscale's?); "
                             "ignored\n")


class Record(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="kind"):
    """A record kind's base: its ``kind``, reading with checks, writing, and assembling.

    A field with a default is optional in a file (older writers left it out); an optional field
    left unset (its default) stays out of the file: absent means "not measured".
    """

    kind: ClassVar[str] = ""
    summary: ClassVar[str] = ""  # one line for docs/records.md

    @classmethod
    @functools.cache
    def field_names(cls) -> frozenset[str]:
        """The fields this kind declares."""
        return frozenset(cls.__struct_fields__)

    @classmethod
    @functools.cache
    def _types(cls) -> dict[str, Any]:
        return {f.name: f.type for f in msgspec.structs.fields(cls)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "record") -> Record:
        """The typed record of ``data`` (a file's JSON object, migrated to the current version).

        Raises:
            RecordError: a required field is missing or a field has the wrong type; the message
                names it and ``where``.
        """
        _note_unknown(cls, data, where)
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as e:
            raise _field_error(e, where, cls.kind) from None
        except HvdscaleError as e:  # a section's own check (a run's config) refused a value
            raise RecordError(f"{where}: field 'config' of a {cls.kind} record: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object a file holds: its version and kind, then its fields."""
        from hvdscale.records.migrate import SCHEMA_VERSION

        return {"schema": SCHEMA_VERSION, **msgspec.to_builtins(self)}

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
                if name not in cls.field_names():
                    raise RecordError(f"{writer} sets field {name!r}, which a {cls.kind} "
                                      "record does not declare")
                fields[name], by[name] = value, writer
        return cls.from_dict({"kind": cls.kind, **fields},
                             where=f"the {cls.kind} record being written")

    def fill(self, **later: Any) -> None:
        """Set fields a later phase of the run knows (start-up, quality, interval): each once.

        Raises:
            RecordError: the field is not declared, already set, or of the wrong type.
        """
        types_ = self._types()
        for name, value in later.items():
            if name not in types_:
                raise RecordError(f"a {self.kind} record has no field {name!r}")
            if getattr(self, name) is not None:
                raise RecordError(f"field {name!r} of the {self.kind} record is already set; "
                                  "each field has one writer")
            try:
                setattr(self, name, msgspec.convert(value, types_[name]))
            except msgspec.ValidationError as e:
                raise _field_error(e, f"field {name!r}", self.kind) from None

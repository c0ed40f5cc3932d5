"""The stack outputs docs/stack-references.md documents for StackReference readers: its table
(output, type, secret), which the program's exports must equal."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.docs_pages import section, table_rows

PAGE, HEADING = "stack-references.md", "## A cluster stack's outputs"
# The table's types, as the values a stack output holds (JSON's, through Pulumi).
TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "string or null": (str, type(None)), "integer": (int,),
    "boolean": (bool,), "map": (dict,), "list": (list,)}


@dataclass(frozen=True)
class DocumentedOutput:
    name: str
    types: tuple[type, ...]
    secret: bool


def documented_outputs() -> dict[str, DocumentedOutput]:
    header, *rows = table_rows(section(PAGE, HEADING))
    assert header[:3] == ["output", "type", "secret"], header
    found = {}
    for name, kind, secret, *_ in rows:
        assert kind in TYPES and secret in ("yes", "no"), (name, kind, secret)
        found[name.strip("`")] = DocumentedOutput(name.strip("`"), TYPES[kind], secret == "yes")
    return found

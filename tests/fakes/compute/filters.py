"""Compute Engine list filters, evaluated the way the API documents them.

The `filter` parameter of `instances.list` / `aggregatedList` (see its description in the
Compute v1 discovery document) takes AIP-160 expressions: `field op value` with `=`, `!=`,
`<`, `>`, `<=`, `>=` or `:` (`labels.owner:*` tests that a key is defined), nested fields
(`labels.ray-node-type`, `scheduling.automaticRestart`), parenthesised terms joined by `AND`
(also implied by juxtaposition) and `OR` (which binds tighter than `AND`, as AIP-160 says), and
`NOT`. The older regular-expression form uses `eq` / `ne` against the whole field and cannot be
mixed with AIP-160 in one request. Both our provider and Ray's GCP node provider send these.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Predicate = Callable[[dict[str, Any]], bool]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<paren>[()])
      | (?P<op><=|>=|!=|=|<|>|:)
      | (?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<word>[^\s()=!<>:"']+)
    )""",
    re.VERBOSE,
)
_REGEX_OPS = {"eq", "ne"}
_KEYWORDS = {"AND", "OR", "NOT"}


class FilterError(ValueError):
    """The expression is not a valid Compute filter (the API answers 400)."""


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise FilterError(f"unexpected character at {position}: {text[position:]!r}")
        kind = match.lastgroup or ""
        value = match.group(kind)
        if kind == "paren":
            kind = value
        elif kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        elif kind == "word" and value in _REGEX_OPS:
            kind = "op"
        elif kind == "word" and value in _KEYWORDS:
            kind = value
        tokens.append((kind, value))
        position = match.end()
    return tokens


def _field(resource: dict[str, Any], path: str) -> Any:
    value: Any = resource
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _compare(path: str, op: str, literal: str) -> Predicate:
    def check(resource: dict[str, Any]) -> bool:
        value = _field(resource, path)
        if op == ":":
            if literal == "*":
                return value is not None
            return value is not None and literal in _as_text(value)
        if op in _REGEX_OPS:
            matched = value is not None and re.fullmatch(literal, _as_text(value)) is not None
            return matched if op == "eq" else not matched
        if value is None:
            return op == "!="
        if op in {"=", "!="}:
            return (_as_text(value) == literal) == (op == "=")
        try:
            left, right = float(value), float(literal)
        except (TypeError, ValueError):
            left, right = _as_text(value), literal  # type: ignore[assignment]
        return {"<": left < right, ">": left > right, "<=": left <= right, ">=": left >= right}[op]

    return check


class _Parser:
    """sequence := factor ([AND] factor)* ; factor := term (OR term)* ;
    term := [NOT] ( '(' sequence ')' | field op value )"""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.index = tokens, 0
        self.ops: set[str] = set()

    def peek(self) -> str | None:
        return self.tokens[self.index][0] if self.index < len(self.tokens) else None

    def take(self, kind: str) -> str:
        if self.peek() != kind:
            found = self.tokens[self.index][1] if self.index < len(self.tokens) else "the end"
            raise FilterError(f"expected {kind}, found {found!r}")
        self.index += 1
        return self.tokens[self.index - 1][1]

    def sequence(self) -> Predicate:
        parts = [self.factor()]
        while self.peek() not in (None, ")"):
            if self.peek() == "AND":
                self.index += 1
            parts.append(self.factor())
        return lambda r: all(p(r) for p in parts)

    def factor(self) -> Predicate:
        parts = [self.term()]
        while self.peek() == "OR":
            self.index += 1
            parts.append(self.term())
        return lambda r: any(p(r) for p in parts)

    def term(self) -> Predicate:
        if self.peek() == "NOT":
            self.index += 1
            inner = self.term()
            return lambda r: not inner(r)
        if self.peek() == "(":
            self.index += 1
            inner = self.sequence()
            self.take(")")
            return inner
        path = self.take("word")
        op = self.take("op")
        self.ops.add(op)
        kind = self.peek()
        if kind not in ("word", "quoted"):
            raise FilterError(f"no value after {path} {op}")
        return _compare(path, op, self.take(kind))


def compile_filter(text: str | None) -> Predicate:
    """A predicate over a resource's JSON; FilterError when GCE would answer 400."""
    if not text or not text.strip():
        return lambda _resource: True
    parser = _Parser(_tokens(text))
    predicate = parser.sequence()
    if parser.index != len(parser.tokens):
        raise FilterError(f"unexpected {parser.tokens[parser.index][1]!r}")
    if parser.ops & _REGEX_OPS and parser.ops - _REGEX_OPS:
        raise FilterError("regular-expression and AIP-160 operators cannot be mixed")
    return predicate

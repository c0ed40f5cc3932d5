"""Randomly broken cluster YAMLs, as hypothesis strategies (`mutated_texts`): seeded from the
shipped cluster YAMLs and Ray's own GCP `defaults.yaml` from the installed wheel (`SEEDS`).

- anywhere in the document: keys deleted, values swapped for other types, huge numbers,
  unicode and lone surrogates, deep nesting, YAML aliases;
- at every field the model declares (walked from `ClusterConfig`'s annotations, so a new
  field is mutated as soon as it exists), values of its own type at their edges (huge or
  negative numbers, Unicode digits, odd Unicode, `~user` paths, dates) and of wrong types,
  nested deep, set whether or not the seed has the field;
- file_mounts and `ssh_private_key` pointing at the odd local paths the caller gives;
- the YAML text: a key given twice, broken syntax.

Used by tests/model/test_config_mutations.py (the loader, plan and scripts) and
tests/ops/lifecycle/test_up_checks_whole.py (the up's gate agrees with the plan).
"""

from __future__ import annotations

import copy
import datetime
import types
import typing
from pathlib import Path
from typing import Any

import ray.autoscaler.gcp
import yaml
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from model.config import ClusterConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RAY_DEFAULTS = Path(ray.autoscaler.gcp.__file__).parent / "defaults.yaml"


def _seeds() -> list[tuple[str, dict[str, Any]]]:
    seeds = [(path.name, yaml.safe_load(path.read_text()))
             for path in sorted((PROJECT_ROOT / "stacks" / "clusters").glob("*.yaml"))]
    ray_defaults = yaml.safe_load(RAY_DEFAULTS.read_text())
    ray_defaults["provider"]["project_id"] = "my-gcp-project"  # Ray ships it null
    return [*seeds, ("ray:gcp/defaults.yaml", ray_defaults)]


SEEDS = _seeds()


ODD_TEXT = ["\ud800", "\udfff x", "naïve", "名前", "\u202e", "a\x00b", "x" * 300, " ", "-",
            "$(reboot)", "'", "\n", "{", "*", "&a", "~", "null", "1e309"]
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from([10**400, 2**63, 10**5]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(ODD_TEXT),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


# ---------------------------------------------------------------- every field the model knows

ANY_KEY = "<key>"  # a mapping's key in a slot path: an existing one, or a new odd one
ANY_INDEX = "<index>"  # a list's position in a slot path
UNICODE_DIGITS = ["²", "٣", "１６", "߂", "𝟠", "Ⅻ", "½"]
EDGE_TEXT = [*ODD_TEXT, *UNICODE_DIGITS, "v4-²", "2x²", "v4-１６", "2x2x٣", "~nosuchuser/x",
             "~nosuchuser", "~", "~/x", "Ǆ", "ﬀ", "e\u0301", "\u200b", "👩‍👩‍👧", "İ", "ß"]
HUGE_NUMBERS = [2**63 - 1, 2**63, -(2**63) - 1, 10**400, -1, 0, 1e308, -1e-320, 1.5, 2**53 + 1]
DATES = [datetime.date(2024, 2, 29), datetime.datetime(2024, 1, 1, 12, 0)]


def _slots(annotation: Any, path: tuple = (), seen: frozenset = frozenset()) -> list[tuple]:
    """(path, leaf kind) for every place a value sits in a YAML of `annotation`: each field of
    each model (by its YAML key), inside dicts (`ANY_KEY`) and lists (`ANY_INDEX`), and the
    containers themselves (kind "container")."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _slots(typing.get_args(annotation)[0], path, seen)
    if origin in (typing.Union, types.UnionType):
        return [slot for arg in typing.get_args(annotation) if arg is not type(None)
                for slot in _slots(arg, path, seen)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return []
        found = [(path, "container")]
        for name, field in annotation.model_fields.items():
            found += _slots(field.annotation, (*path, field.alias or name), seen | {annotation})
        return found
    if origin is dict:
        return [(path, "container"), *_slots(typing.get_args(annotation)[1],
                                              (*path, ANY_KEY), seen)]
    if origin is list:
        return [(path, "container"), *_slots(typing.get_args(annotation)[0],
                                              (*path, ANY_INDEX), seen)]
    if origin is typing.Literal:
        return [(path, ("literal", typing.get_args(annotation)))]
    if annotation is SecretStr:
        return [(path, "secret")]
    name = getattr(annotation, "__name__", "any")
    return [(path, name if name in ("str", "int", "float", "bool") else "any")]


def _kind_name(kind: Any) -> str:
    return kind if isinstance(kind, str) else kind[0]


FIELD_SLOTS = [slot for slot in _slots(ClusterConfig) if slot[0]]
FIELD_KINDS = sorted({_kind_name(kind) for _, kind in FIELD_SLOTS})
NESTED = st.builds(lambda value, depth: _nested(depth) if value is None else [value] * 2,
                   st.none() | VALUES, st.sampled_from([2, 40, 200]))
WRONG = st.one_of(VALUES, st.sampled_from(DATES), NESTED,
                  st.dictionaries(st.sampled_from(["a", "1", "client_email", "private_key"]),
                                  st.sampled_from([*DATES, 1, ["x"], {"deep": [[[]]]}, "s"])))


def _value_for(kind: Any) -> st.SearchStrategy:
    """Values of the slot's own type at their edges, or of a wrong type (a third of draws)."""
    if kind == "str":
        own = st.sampled_from(EDGE_TEXT) | st.text(max_size=8) | \
            st.text(st.characters(categories=["Nd", "No", "Lo", "Mn", "Cf", "Zs"]), max_size=6)
    elif kind in ("int", "float"):
        own = st.sampled_from(HUGE_NUMBERS) | st.integers(-(2**66), 2**66) | \
            st.floats() | st.sampled_from([*UNICODE_DIGITS, "1_000", "0x10", "1e3", " 2 "])
    elif kind == "bool":
        own = st.sampled_from([True, False, "yes", "off", 1, 0, "true", "Ｔrue"])
    elif kind == "secret":
        own = st.sampled_from(['{"client_email": "a@b", "private_key": "k", "n": 1}',
                               "[" * 3000 + "]" * 3000, '{"client_email": ["a"]}', ""]) | \
            st.fixed_dictionaries({"client_email": st.just("a@b.iam.gserviceaccount.com"),
                                   "private_key": st.sampled_from(["k", *DATES, [[["k"]]]])})
    elif isinstance(kind, tuple):
        literals = list(kind[1])
        own = st.sampled_from([*literals, *[str(v).upper() for v in literals],
                               *[f"{v}\u200b" for v in literals]])
    else:
        own = VALUES
    return st.one_of(own, own, WRONG)


def _concrete(draw: st.DrawFn, document: Any, path: tuple) -> tuple | None:
    """The slot path with each `ANY_KEY`/`ANY_INDEX` bound, creating the mappings and lists
    on the way that the seed lacks; None where a value in the way is not a container."""
    node, bound = document, []
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if part == ANY_INDEX:
            if not isinstance(node, list):
                return None
            if not node:
                node.append({})
            part = draw(st.integers(0, len(node) - 1))
        elif part == ANY_KEY:
            if not isinstance(node, dict):
                return None
            part = draw(st.sampled_from([*node, "new", "名", "a.b", "²"]))
        elif not isinstance(node, dict):
            return None
        bound.append(part)
        if not last:
            if isinstance(node, dict) and part not in node:
                node[part] = [] if path[depth + 1] == ANY_INDEX else {}
            node = node[part]
    return tuple(bound)


# The same digit in other scripts: str.isdigit() takes each, int() only some.
_DIGIT_FORMS = {str(n): forms for n, forms in enumerate(zip(
    "⁰¹²³⁴⁵⁶⁷⁸⁹", "٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９", "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗", "₀₁₂₃₄₅₆₇₈₉", strict=True))}


def _edge_of(draw: st.DrawFn, current: Any) -> Any:
    """The value the seed has, pushed to an edge of its own type."""
    if isinstance(current, bool):
        return draw(st.sampled_from([str(current).lower(), int(current), "yes", None]))
    if isinstance(current, int | float):
        return draw(st.sampled_from([current * 10**20, -current - 1, current + 2**63,
                                     str(current), float("inf"), 1e308]))
    if isinstance(current, str):
        digits = [i for i, char in enumerate(current) if char in _DIGIT_FORMS]
        if digits and draw(st.booleans()):
            at = draw(st.sampled_from(digits))
            form = draw(st.sampled_from(_DIGIT_FORMS[current[at]]))
            return current[:at] + form + current[at + 1:]
        return draw(st.sampled_from([
            "~nosuchuser/" + current.lstrip("~/"), "~nosuchuser", current * 60,
            current.upper(), current + "\u200b", current + "\n", current.replace("a", "а"),
            f"{current}ß", "~" + current]))
    if isinstance(current, list) and current:
        return draw(st.sampled_from([current * 3, [current], current[::-1]]))
    if isinstance(current, dict) and current:
        return draw(st.sampled_from([{**current, "extra": current},
                                     dict.fromkeys(current, current), {"x": current}]))
    return draw(WRONG)


def _rewrite_strings(value: Any, rewrite: typing.Callable[[str], str]) -> Any:
    """`value` with each string in it, mapping keys too, rewritten."""
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, list):
        return [_rewrite_strings(item, rewrite) for item in value]
    if isinstance(value, dict):
        return {_rewrite_strings(k, rewrite): _rewrite_strings(v, rewrite)
                for k, v in value.items()}
    return value


def _present(document: Any, path: tuple) -> bool:
    """Whether the seed holds a value at the slot (some key or index for each wildcard)."""
    if not path:
        return True
    head, rest = path[0], path[1:]
    if head == ANY_KEY:
        return isinstance(document, dict) and any(_present(v, rest) for v in document.values())
    if head == ANY_INDEX:
        return isinstance(document, list) and any(_present(v, rest) for v in document)
    return isinstance(document, dict) and head in document and _present(document[head], rest)


def _mutate_a_field(draw: st.DrawFn, document: Any) -> None:
    """A field the seed has pushed to its edge (half the time), or any field the model
    declares set to an edge or wrong-typed value."""
    kind = draw(st.sampled_from(FIELD_KINDS))  # every type equally, however many fields
    slots = [slot for slot in FIELD_SLOTS if _kind_name(slot[1]) == kind]
    present = [slot for slot in slots if _present(document, slot[0])]
    path, kind = draw(st.sampled_from(present if present and draw(st.booleans()) else slots))
    bound = _concrete(draw, document, path)
    if bound is None:
        return
    parent = _get(document, bound[:-1])
    if isinstance(parent, list) and bound[-1] >= len(parent):
        return
    exists = isinstance(parent, dict) and bound[-1] in parent or isinstance(parent, list)
    if exists and draw(st.booleans()):
        parent[bound[-1]] = _edge_of(draw, parent[bound[-1]])
    else:
        parent[bound[-1]] = draw(WRONG if kind == "container" else _value_for(kind))


def _duplicate_a_key(draw: st.DrawFn, text: str) -> str:
    """A `key: value` line given twice in its mapping (the second one changed)."""
    lines = text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if ":" in line and line.lstrip()[:1] not in "-#"]
    if not keyed:
        return text
    at = draw(st.sampled_from(keyed))
    indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
    key = lines[at].strip().split(":", 1)[0]
    value = draw(st.sampled_from(["null", "1", "x", "[]", "{}", "2x²"]))
    return "".join([*lines[:at + 1], f"{indent}{key}: {value}\n", *lines[at + 1:]])


def _locations(node: Any, path: tuple = (), seen: set[int] | None = None) -> list[tuple]:
    """Every path in the document, the document itself included; a shared (aliased) part is
    walked once, so a bomb inside a bomb is not enumerated leaf by leaf."""
    seen = set() if seen is None else seen
    found = [path]
    if isinstance(node, dict | list):
        if id(node) in seen:
            return found
        seen.add(id(node))
    items = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        found += _locations(child, (*path, key), seen)
    return found


def _get(document: Any, path: tuple) -> Any:
    for key in path:
        document = document[key]
    return document


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def _alias_bomb(levels: int, width: int) -> Any:
    """Shared lists: dumped as YAML anchors and aliases, each level `width` times the last."""
    value: Any = ["lol"]
    for _ in range(levels):
        value = [value] * width
    return value


def _other_digits(draw: st.DrawFn, text: str) -> str:
    """One ASCII digit of `text`, or all of them, as the same digit in another script."""
    script = draw(st.integers(0, 4))
    if draw(st.integers(0, 3)) == 0:
        return text.translate(str.maketrans({digit: forms[script]
                                             for digit, forms in _DIGIT_FORMS.items()}))
    at = draw(st.sampled_from([i for i, char in enumerate(text) if char in _DIGIT_FORMS]))
    return text[:at] + _DIGIT_FORMS[text[at]][script] + text[at + 1:]


_TEXT_EDITS = {  # operation: (which strings it applies to, the edit)
    "digits": (lambda text: isinstance(text, str) and any(c in _DIGIT_FORMS for c in text),
               _other_digits),
    "homes": (lambda text: isinstance(text, str) and text[:1] in ("/", "~", "."),
              lambda draw, text: "~nosuchuser/" + text.lstrip("~/")),
}


def _push_a_value(draw: st.DrawFn, document: Any) -> None:
    """A scalar the seed has, pushed to an edge of its own type (most such documents load,
    so the plan and the scripts meet the value)."""
    operation = draw(st.sampled_from(["edge", "digits", "homes"]))
    wanted = _TEXT_EDITS[operation][0] if operation in _TEXT_EDITS else \
        (lambda value: value is None or isinstance(value, str | int | float))
    places = [place for place in _locations(document) if place and wanted(_get(document, place))]
    if not places:
        return
    place = draw(st.sampled_from(places))
    parent, value = _get(document, place[:-1]), _get(document, place)
    parent[place[-1]] = _TEXT_EDITS[operation][1](draw, value) if operation in _TEXT_EDITS \
        else _edge_of(draw, value)


@st.composite
def mutated_texts(draw: st.DrawFn, odd_paths: list[str]) -> tuple[str, str]:
    name, seed = draw(st.sampled_from(SEEDS))
    document = copy.deepcopy(seed)
    if draw(st.booleans()):  # gentle: edges of the seed's own values
        for _ in range(draw(st.integers(1, 3))):
            _push_a_value(draw, document)
        return name, yaml.safe_dump(document, allow_unicode=True, sort_keys=False)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        operation = draw(st.sampled_from(
            ["delete", "replace", "wrap", "stringify", "nest", "alias", "bomb", "repeat",
             "flip", "digits", "digits", "homes", "homes"]))
        places = _locations(document)
        if operation in _TEXT_EDITS:  # a string the edit changes
            wanted = _TEXT_EDITS[operation][0]
            places = [place for place in places if place and wanted(_get(document, place))]
            if not places:
                continue
        path = draw(st.sampled_from(places))
        parent_path, key = path[:-1], path[-1] if path else None
        if key is None:
            continue
        parent = _get(document, parent_path)
        if operation in _TEXT_EDITS:
            parent[key] = _TEXT_EDITS[operation][1](draw, parent[key])
        elif operation == "repeat":  # in a list: e.g. a second disk
            if isinstance(parent, list):
                parent.append(copy.deepcopy(parent[key]))
        elif operation == "flip":
            if isinstance(parent[key], bool):
                parent[key] = not parent[key]
        elif operation == "delete":
            del parent[key]
        elif operation == "replace":
            parent[key] = draw(VALUES)
        elif operation == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}]))
        elif operation == "stringify":
            parent[key] = str(parent[key])
        elif operation == "nest":
            parent[key] = _nested(draw(st.sampled_from([30, 120])))
        elif operation == "alias":  # one object twice: dumped as an anchor and an alias
            shared = copy.deepcopy(parent[key])
            parent[key] = [shared, shared] if draw(st.booleans()) else {"a": shared, "b": shared}
        elif operation == "bomb":  # last: a bomb in a bomb is billions of values to walk
            parent[key] = _alias_bomb(draw(st.integers(2, 5)), 8)
            break
    if isinstance(document, dict):  # a few fields, or a storm of them
        for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 8, 16]))):
            _mutate_a_field(draw, document)
    if isinstance(document, dict) and draw(st.integers(0, 2)) == 0:
        odd = draw(st.sampled_from(odd_paths))
        if draw(st.booleans()):
            document.setdefault("auth", {})
            if isinstance(document["auth"], dict):
                document["auth"][draw(st.sampled_from(["ssh_private_key", "ssh_public_key"]))] \
                    = odd
        else:
            target = draw(st.sampled_from(["/home/ray/x", "~/x", "/", "", "relative", "/tmp/ä"]))
            mounts = document.get("file_mounts")
            document["file_mounts"] = {**(mounts if isinstance(mounts, dict) else {}),
                                       target: odd}
    text = yaml.safe_dump(document, allow_unicode=True, sort_keys=False)
    if draw(st.integers(0, 9)) == 0:
        text = _duplicate_a_key(draw, text)
    edit = draw(st.sampled_from(["none"] * 12 + ["truncate", "tab", "colon"]))
    if edit != "none" and text:
        at = draw(st.integers(0, len(text) - 1))
        text = {"truncate": text[:at], "tab": text[:at] + "\t" + text[at:],
                "colon": text[:at] + ": :" + text[at:]}[edit]
    return name, text

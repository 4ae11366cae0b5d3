"""The kinds of JSON value a schema's own keywords allow, read without compiling it.

`kinds_of` reads a schema's `type`, `const`/`enum` and `allOf` parts (numbers that are not
integers are the kind "fraction"); `typed` writes a schema of given kinds back; `value_type`
is a JSON value's type as JSON Schema names it.
"""

from __future__ import annotations

from typing import Any, Optional

ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})


def value_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


KINDS = frozenset({"null", "boolean", "object", "array", "string", "integer", "fraction"})
NUMERIC = frozenset({"integer", "fraction"})


def kinds_of(node: Any) -> frozenset[str]:
    """The kinds of value `node`'s own `type` (and listed values) allow."""
    if node is False:
        return frozenset()
    if not isinstance(node, dict):
        return KINDS
    out = KINDS
    t = node.get("type")
    if t is not None:
        names = [t] if isinstance(t, str) else t if isinstance(t, list) else []
        k: set[str] = set()
        for n in names:
            if n == "number":
                k |= NUMERIC
            elif n in ALL_TYPES:
                k.add(n)
        out = out & frozenset(k)
    values = [node["const"]] if "const" in node else node.get("enum") if isinstance(node.get("enum"), list) else None
    if values is not None:
        out = out & frozenset(value_kind(v) for v in values)
    for sub in node.get("allOf") if isinstance(node.get("allOf"), list) else ():
        out = out & kinds_of(sub)
    return out


def value_kind(v: Any) -> str:
    """A value's JSON type, a number that is not an integer named "fraction"."""
    t = value_type(v)
    return "fraction" if t == "number" else t


def typed(kinds: frozenset[str], **rest: Any) -> Optional[dict]:
    """A schema of values of these kinds (with `rest`), or None when there is none that can
    be written (numbers without the integers cannot: those are left out, a restriction)."""
    if kinds >= KINDS:
        return dict(rest)
    names = sorted(k for k in kinds if k not in NUMERIC)
    if NUMERIC <= kinds:
        names.append("number")
    elif "integer" in kinds:
        names.append("integer")
    if not names:
        return None
    return {"type": names[0] if len(names) == 1 else names, **rest}

"""What a schema says of a value's kind and of an object's properties, read without
compiling it: the kinds its `type` and listed values allow (`kinds_of`), a schema of
given kinds (`typed`), and the presence and listed values of properties a conjunction of
parts states (`facts_of`, `entailed`), which Logic.product uses to drop conjunctions no
value satisfies and options that already hold.
"""

from __future__ import annotations

from typing import Any, Optional

from ministruct.grammar.schema.disjoint import canonical
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.kinds import KINDS, kinds_of, typed, value_kind


def pure_values(s: Any) -> Optional[list]:
    """The values of a schema that only lists values (`const`/`enum`, maybe with `type`;
    annotations aside)."""
    if not isinstance(s, dict) or {k for k in s if k not in ANNOTATIONS} - {"type"} not in ({"const"}, {"enum"}):
        return None
    v = [s["const"]] if "const" in s else s["enum"]
    if not isinstance(v, list):
        return None
    kinds = kinds_of({"type": s["type"]}) if "type" in s else KINDS
    return [x for x in v if value_kind(x) in kinds]


def entailed(o: Any, kinds: frozenset[str], facts: dict, closed: Optional[frozenset[str]] = None) -> bool:
    """Do `facts` (of objects, with values of `kinds` only, carrying no names outside
    `closed` when given) already make `o` hold? Only for options that speak of presence
    and listed values (False: not known)."""
    if not isinstance(o, dict) or {k for k in o if k not in ANNOTATIONS} - {"type", "required", "properties"}:
        return False
    if not kinds <= kinds_of(o) or kinds - {"object"}:
        return False
    req = o.get("required", [])
    props = o.get("properties", {})
    if not isinstance(req, list) or not isinstance(props, dict):
        return False
    for name in req:
        if facts.get(name, [None])[0] is not True:
            return False
    for name, sub in props.items():
        absent = closed is not None and name not in closed
        present, allowed, banned = facts.get(name, [False if absent else None, None, frozenset()])
        if present is False:
            continue
        if sub is False:
            return False
        if isinstance(sub, dict) and set(sub) == {"not"} and pure_values(sub["not"]) is not None:
            hit = {canonical(v) for v in pure_values(sub["not"]) or ()}
            if not (hit <= banned or (allowed is not None and not (allowed - banned) & hit)):
                return False
        elif pure_values(sub) is not None:
            if allowed is None or not (allowed - banned) <= {canonical(v) for v in pure_values(sub) or ()}:
                return False
        else:
            return False
    return True


def facts_of(s: Any, facts: Optional[dict]) -> Optional[dict]:
    """`facts` (name -> [present: True/False/None, allowed values or None, excluded values])
    with what `s` says of object properties (through `allOf`), or None when they cannot all
    hold of one object. A sufficient test: what it cannot read it leaves alone."""
    if facts is None:
        return None
    out = {n: list(f) for n, f in facts.items()}
    stack = [s]
    while stack:
        x = stack.pop()
        if not isinstance(x, dict):
            continue
        if isinstance(x.get("allOf"), list):
            stack.extend(x["allOf"])
        req = x.get("required") if isinstance(x.get("required"), list) else []
        props = x.get("properties") if isinstance(x.get("properties"), dict) else {}
        for name in req:
            if isinstance(name, str):
                f = out.setdefault(name, [None, None, frozenset()])
                if f[0] is False:
                    return None
                f[0] = True
        for name, sub in props.items():
            f = out.setdefault(name, [None, None, frozenset()])
            if sub is False:
                if f[0] is True:
                    return None
                f[0] = False
                continue
            vals = pure_values(sub)
            if vals is not None:
                keys = frozenset(canonical(v) for v in vals)
                f[1] = keys if f[1] is None else f[1] & keys
            elif isinstance(sub, dict) and set(sub) == {"not"} and pure_values(sub["not"]) is not None:
                f[2] = f[2] | {canonical(v) for v in pure_values(sub["not"]) or ()}
    for f in out.values():
        if f[1] is not None and not (f[1] - f[2]):  # no value left: the property must be absent
            if f[0] is True:
                return None
            f[0] = False
    return out


def fold_presence(out: list[Any]) -> list[Any]:
    """`out` with each pair "objects without name n" and "objects with n, whose value fails
    S" as the one branch "objects whose n, if there, fails S" (`properties: {n: {not: S}}`):
    how a failing `{required: [n], properties: {n: S}}` reads, so that a conjunction of
    many such failures (a oneOf of one-property branches) stays one branch."""

    def only(b: Any, keys: set[str]) -> Optional[str]:
        if not isinstance(b, dict) or b.keys() != keys or b["type"] != "object":
            return None
        props = b["properties"]
        return next(iter(props)) if isinstance(props, dict) and len(props) == 1 else None

    absent = {}
    for i, b in enumerate(out):
        n = only(b, {"type", "properties"})
        if n is not None and b["properties"][n] is False:
            absent.setdefault(n, i)
    drop: set[int] = set()
    for i, b in enumerate(out):
        n = only(b, {"type", "required", "properties"})
        if n is not None and b["required"] == [n] and n in absent and absent[n] not in drop:
            out[i] = {"type": "object", "properties": b["properties"]}
            drop.add(absent[n])
    return [b for i, b in enumerate(out) if i not in drop]


def unequal(x: Any, kinds: frozenset[str]) -> list[Any]:
    """Schemas whose union is every value of `kinds` other than the object or array
    `x`: another kind, a member missing or more of them, or a member of another value."""
    own = frozenset({"object" if isinstance(x, dict) else "array"})
    out = [t for t in [typed(kinds - own)] if t is not None]
    if not kinds & own:
        return out
    if isinstance(x, dict):
        out += [{"type": "object", "properties": {k: False}} for k in x]
        out.append({"type": "object", "minProperties": len(x) + 1})
        out += [{"type": "object", "required": [k], "properties": {k: {"not": {"const": v}}}} for k, v in x.items()]
    else:
        out += [{"type": "array", "maxItems": len(x) - 1}, {"type": "array", "minItems": len(x) + 1}]
        out += [
            {"type": "array", "minItems": i + 1, "prefixItems": [True] * i + [{"not": {"const": v}}]}
            for i, v in enumerate(x)
        ]
    return out


def written_key(s: Any) -> Optional[str]:
    """One text per schema written alike (None: not a JSON value)."""
    try:
        return canonical(s)
    except (TypeError, ValueError, RecursionError):
        return None

"""JSON values that are neither strings nor containers of a schema: any value at all,
listed values (`enum`/`const`), and numbers (bounds, values a `not` excludes, multipleOf)."""

from __future__ import annotations

import json
import math
from typing import Any, Optional

from ministruct.grammar.ir import NOTHING, CharClass, Expr, Literal, Repeat, RuleRef, alt, seq
from ministruct.grammar.schema import numbers as num
from ministruct.grammar.schema.formats import ANY_STRING, string_literal
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.logic import Excluded, native_not
from ministruct.grammar.schema.multiples import number_multiples, read_steps
from ministruct.grammar.schema.writer import GrammarWriter, alt_known


def excluded_by_not(node: dict) -> Excluded:
    """What a native `not` forbids (schema_logic.native_not): nothing when there is none."""
    got = native_not(node["not"]) if "not" in node else None
    return got if got is not None else Excluded([], [])


_JSON_TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def _typed_only(schema: Any) -> Optional[Any]:
    """Validity of a value against `schema` when it asserts nothing but `type` (an enum's
    siblings, usually), as Draft 2020-12 reads it; None for any other schema. Spares the
    common enum the import of jsonschema."""
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, dict) or not set(schema) - {"type"} <= ANNOTATIONS or "$id" in schema:
        return None
    names = schema.get("type")
    if names is None:
        return lambda v: True
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) and n in _JSON_TYPES for n in names):
        return None
    checks = [_JSON_TYPES[n] for n in names]
    return lambda v: any(c(v) for c in checks)


class Values(GrammarWriter):
    """any_value, enum/const and number, for the compiler."""

    _any_rules: dict[int, str]

    # ------------------------------------------------------------ any value

    def any_value(self, depth: int) -> Expr:
        depth = self.key_depth(depth)
        if depth in self._any_rules:
            return RuleRef(self._any_rules[depth])
        name = self.fresh("value" if self.ws != "pretty" else f"value-d{depth}")
        self._any_rules[depth] = name
        ref = RuleRef(name)
        scalars = [
            Literal("null"),
            Literal("true"),
            Literal("false"),
            self.shared("string", ANY_STRING),
            self.shared("number", self.any_number()),
        ]
        if self._depth_ok(depth + 1):
            child = self.any_value(depth + 1)
            kv = seq(self.shared("string", ANY_STRING), self.colon(), child)
            members = seq(kv, Repeat(seq(self.comma(depth), kv), 0, None))
            items = seq(child, Repeat(seq(self.comma(depth), child), 0, None))
            obj = alt(
                seq(Literal("{"), self.empty_inside(), Literal("}")),
                seq(Literal("{"), self.open_(depth), members, self.close(depth), Literal("}")),
            )
            arr = alt(
                seq(Literal("["), self.empty_inside(), Literal("]")),
                seq(Literal("["), self.open_(depth), items, self.close(depth), Literal("]")),
            )
        else:
            obj, arr = Literal("{}"), Literal("[]")
        self.define(name, alt(obj, arr, *scalars))
        return ref

    @staticmethod
    def any_number() -> Expr:
        d = CharClass(((48, 57),))
        return seq(
            Repeat(Literal("-"), 0, 1),
            alt(Literal("0"), seq(CharClass(((49, 57),)), Repeat(d, 0, None))),
            Repeat(seq(Literal("."), Repeat(d, 1, None)), 0, 1),
            Repeat(
                seq(
                    CharClass(((69, 69), (101, 101))), Repeat(CharClass(((43, 43), (45, 45))), 0, 1), Repeat(d, 1, None)
                ),
                0,
                1,
            ),
        )

    def enum(self, schema: dict, node: dict, ptr: str, depth: int) -> Expr:
        values = [node["const"]] if "const" in node else node["enum"]
        if not isinstance(values, list):
            raise self.error("enum must be an array", ptr + "/enum", "enum")
        if isinstance(schema, dict):  # each value is in the list it came from: check the other keywords
            listed = "const" if "const" in node else "enum"
            schema = {k: x for k, x in schema.items() if k != listed}
        valid = _typed_only(schema)
        if valid is None:  # keywords beyond `type`: jsonschema decides
            valid = self.validator.evolve(schema=schema).is_valid
        opts = []
        for val in values:
            if valid(val):
                opts.append(self.literal(val, depth))
                if isinstance(val, float) and val.is_integer() and abs(val) < 1e16:
                    opts.append(Literal(str(int(val))))
        return alt_known(*opts)

    def literal(self, val: Any, depth: int) -> Expr:
        if isinstance(val, str):
            return string_literal(val)
        if isinstance(val, dict):
            if not val:
                return seq(Literal("{"), self.empty_inside(), Literal("}"))
            parts: list[Expr] = [Literal("{"), self.open_(depth)]
            for i, (k, x) in enumerate(val.items()):
                if i:
                    parts.append(self.comma(depth))
                parts += [string_literal(k), self.colon(), self.literal(x, depth + 1)]
            return seq(*parts, self.close(depth), Literal("}"))
        if isinstance(val, list):
            if not val:
                return seq(Literal("["), self.empty_inside(), Literal("]"))
            parts = [Literal("["), self.open_(depth)]
            for i, x in enumerate(val):
                if i:
                    parts.append(self.comma(depth))
                parts.append(self.literal(x, depth + 1))
            return seq(*parts, self.close(depth), Literal("]"))
        return Literal(json.dumps(val))

    # ------------------------------------------------------------ scalars

    def number(self, node: dict, ptr: str, integer: bool) -> Expr:
        b = {}
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if k in node:
                x = node[k]
                if (
                    isinstance(x, bool)
                    or not isinstance(x, (int, float))
                    or (isinstance(x, float) and not math.isfinite(x))
                ):
                    raise self.error(f"{k} must be a number", f"{ptr}/{k}", k)
                b[k] = x
        lo, hi = num.int_bounds(
            b.get("minimum"), b.get("maximum"), b.get("exclusiveMinimum"), b.get("exclusiveMaximum")
        )
        # values a native `not` lists: the ranges are split around them
        excluded = [v for v in excluded_by_not(node).values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        points = sorted({int(v) for v in excluded if isinstance(v, int) or v.is_integer()})
        int_ranges = num.split_range(lo, hi, points)
        flo, fhi = num.float_bounds(
            b.get("minimum"), b.get("maximum"), b.get("exclusiveMinimum"), b.get("exclusiveMaximum")
        )

        def fractions(lo: float, hi: float) -> list[Expr]:
            floats = num.split_float_range(max(flo, lo), min(fhi, hi), [float(v) for v in excluded if abs(v) < 1.7e308])
            return [e for e in (num.decimal_range(a, z) for a, z in floats) if e is not None]

        steps = read_steps(self, node, ptr)
        if steps:
            got = number_multiples(self, steps, int_ranges, fractions, integer, ptr)
            return NOTHING if got is None else got
        if not b and not excluded:
            return self.shared("integer", self.int_syntax()) if integer else self.shared("number", self.any_number())
        ints = alt_known(*(num.int_range(a, z) for a, z in int_ranges))
        if integer:
            return ints
        return alt_known(ints, *fractions(-math.inf, math.inf))

    @staticmethod
    def int_syntax() -> Expr:
        return seq(
            Repeat(Literal("-"), 0, 1),
            alt(Literal("0"), seq(CharClass(((49, 57),)), Repeat(CharClass(((48, 57),)), 0, None))),
        )

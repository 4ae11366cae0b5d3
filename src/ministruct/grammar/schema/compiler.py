"""JSON Schema (Draft 2020-12; draft-07 `definitions`) -> grammar IR, exact or loud.

Every string the grammar accepts is a valid instance (`jsonschema`'s Draft202012Validator
with its format checker); whatever cannot be enforced that way is a SchemaError naming
the keyword and its JSON pointer (with `lenient=True`: ignored, one warning each).

Choices, all of them restrictions (valid instances the grammar rejects), never loosenings:
- Layout: properties in the order of `properties`, then required names not listed there,
  then additional properties. `canonical_order()` reorders a value to that layout.
- Whitespace: "spaced" (the default) one space after `:` and `,` and none elsewhere, as
  `json.dumps(value)` writes it; "compact" none; "flexible" at most 20 of space/tab/CR/LF
  between tokens (not before or after the document); "pretty" exactly
  `json.dumps(value, indent=2)`, nesting capped at 24 levels.
- Numbers: exponent forms only where no bound or multipleOf applies; integers without
  fraction; enum/const values in their `json.dumps` form (plus `1` for `1.0`).
- Strings: keys of additional properties are written without escapes when listed names
  must be excluded; `pattern`/`format` strings use raw characters, short escapes and
  `\\uXXXX` escapes of BMP characters; `format` grammars are exact subsets of the format.
- `pattern` is a search (`re.search`, as the validator does: Python semantics, so e.g.
  `\\d` is Unicode digits and `$` also matches before a final newline, unlike ECMA 262).
- Duplicate keys among additional properties are not prevented (RFC 8259: names SHOULD
  be unique); everything else about counting keys is exact.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Optional

from ministruct.errors import GrammarSyntaxError, SchemaError, UsageError
from ministruct.grammar.analysis import find_left_recursion, productive_rules, prune_unproductive
from ministruct.grammar.ir import (
    EMPTY,
    NOTHING,
    CharClass,
    Expr,
    Grammar,
    Literal,
    Mark,
    Repeat,
    RuleRef,
    alt,
    alt_some,
    seq,
    seq_all,
)
from ministruct.grammar.json_text import non_json_number
from ministruct.grammar.limits import MAX_JSON_NESTING, MAX_REPEAT, nesting_error, reshape, short_pointer
from ministruct.grammar.schema import numbers as num
from ministruct.grammar.schema.budget import below, within_length
from ministruct.grammar.schema.complement import MAX_DFA_WORK
from ministruct.grammar.schema.cycles import refuse_ref_cycles
from ministruct.grammar.schema.disjoint import Disjointness
from ministruct.grammar.schema.documents import bundle
from ministruct.grammar.schema.dynamic import EMPTY_SCOPE, Dynamic
from ministruct.grammar.schema.formats import (
    ANY_STRING,
    ASCII_FORMATS,
    COUNTED_CHAR,
    KNOWN_UNSUPPORTED,
    SUPPORTED_FORMATS,
    encode_chars,
    format_expr,
    length_bounds,
    restrict_length,
    search_core,
    search_with_length,
    small_format_expr,
    string_literal,
)
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.logic import Excluded, Logic, LogicLimit, native_not
from ministruct.grammar.schema.merge import (
    AMBIGUOUS,
    CONDITIONS,
    PATTERNS,
    MergeError,
    Resolver,
    merge_all,
    schema_types,
)
from ministruct.grammar.schema.multiples import exact_validator, number_multiples, read_steps
from ministruct.grammar.schema.objects import required_dependencies
from ministruct.grammar.schema.options import SchemaOptions
from ministruct.grammar.schema.patterns import (
    MAX_FORMAT_PRODUCT_STATES,
    MAX_PRODUCT_RULES,
    PatternTooLarge,
    pattern_with_length,
)
from ministruct.grammar.schema.unevaluated import without_unevaluated
from ministruct.grammar.schema.unique import item_values

__all__ = ["schema_to_grammar", "canonical_order", "SchemaError"]

WS_BOUND = 20
MAX_PRETTY_DEPTH = 24
MAX_OBJECT_STATES = 4000
MAX_REWRITTEN_BRANCHES = 4000  # branches made by not/if/oneOf rewrites in one schema
# rules made by pattern/format/length products in one schema; past it, a product that
# length bounds need is replaced by a part of the language that fits (schema_budget)
MAX_SCHEMA_PRODUCT_RULES = 8_000
SHORTER_MAXIMA = (256, 128, 64)  # a format, a pattern and a maxLength too large together: these maxima
TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
UNSUPPORTED = {
    "not",
    "if",
    "then",
    "else",
    "contains",
    "minContains",
    "maxContains",
    "uniqueItems",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
    "$recursiveRef",
    "$recursiveAnchor",
    CONDITIONS,  # (rewritten before a node is typed: never left unenforced in silence)
}


_GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")


def _excluded(node: dict) -> Excluded:
    """What a native `not` forbids (schema_logic.native_not): nothing when there is none."""
    got = native_not(node["not"]) if "not" in node else None
    return got if got is not None else Excluded([], [])


def _has_id(node: Any) -> bool:
    return isinstance(node, dict) and "$id" in node


def _same(a: Any, b: Any) -> bool:
    """JSON equality of a scalar value (true is not 1)."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _searched(pattern: str) -> str:
    """A regex whose full matches are the strings `pattern` finds a match in (re.search)."""
    flags = _GLOBAL_FLAGS.match(pattern).group(0)  # type: ignore[union-attr]  # they must stay in front
    return f"{flags}[\\s\\S]*(?:{pattern[len(flags) :]})[\\s\\S]*"


def _dead(e: Optional[Expr]) -> bool:
    return e is None or e == NOTHING


def _alt(*opts: Optional[Expr]) -> Expr:
    return alt_some(*(o for o in opts if o is not None))


def _seq(*items: Optional[Expr]) -> Expr:
    return NOTHING if any(i is None for i in items) else seq_all(*items)  # type: ignore[arg-type]


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


class _Compiler:
    def __init__(self, root: Any, options: SchemaOptions, source: str) -> None:
        self.ws, self.lenient, self.source = options.whitespace, options.lenient, source
        self.oneof_as_anyof = options.oneof_as_anyof
        self.explicit = options.extra_properties == "explicit"
        self.marking = options.marks
        self.marks: dict[str, Mark] = {}
        self.resolver = Resolver(root, self.error)
        self.disjointness = Disjointness(self.resolver, lambda: self.validator)
        self.logic = Logic(self.resolver, self.explicit, lambda v, sch: self.validator.evolve(schema=sch).is_valid(v))
        self._rewritten = 0  # branches made by rewrites so far (MAX_REWRITTEN_BRANCHES)
        self._product_rules = 0  # rules made by pattern/format/length products so far
        self._dfa_work = [MAX_DFA_WORK]  # what is left of the schema's budget for building automata
        self._merged_rules: dict[tuple, str] = {}
        self.multiples_made: dict[tuple, Optional[Expr]] = {}  # schema_multiples: machines made
        self.multiple_states = 0  # and their states together
        self.keys_made: dict[tuple, Expr] = {}  # schema_objects.not_in_names: keys other than names
        self._merged_done: set[str] = set()
        self._document_ids = _object_ids(root)  # the schema objects of the document (kept alive by it)
        self._nested_ids = len(set(self.resolver.bases.values())) > 1  # where a $ref sits decides its target
        self.rules: dict[str, Expr] = {}
        self.warnings: list[str] = []
        self._ref_rules: dict[tuple[str, int, Any], str] = {}
        self.dynamic = Dynamic(self.resolver)
        if self.dynamic.used:
            self.resolver.part_paths = {}
            self.resolver.dynamic_hook = self._dynamic_in_merge
        self._scope, self._resource, self._lost, self._here = EMPTY_SCOPE, None, False, None
        self._merge_paths: dict[int, tuple] = {}  # Resolver.part_paths of the merge whose parts are compiled
        self._any_rules: dict[int, str] = {}
        self._validator = None
        self._shared: dict[str, str] = {}
        self._next_suffix: dict[str, int] = {}  # per name hint: where fresh() resumes counting

    # ------------------------------------------------------------ plumbing

    def error(self, message: str, pointer: str, keyword: Optional[str] = None) -> SchemaError:
        return SchemaError(message, pointer=pointer or "/", keyword=keyword, source=self.source)

    def unsupported(self, keyword: str, ptr: str, why: str = "is not enforced") -> None:
        where = f"{ptr}/{keyword}" if ptr != "/" else f"/{keyword}"
        if not self.lenient:
            raise self.error(f"keyword '{keyword}' {why} (lenient=True ignores it)", where, keyword)
        msg = f"{self.source}: at {where}: keyword '{keyword}' {why}; ignored (lenient)"
        if msg not in self.warnings:
            self.warnings.append(msg)

    def restricted(self, keyword: str, ptr: str, why: str) -> None:
        """Say (one warning) that `keyword` at `ptr` is enforced on a smaller language than
        the schema's: every output is valid, some valid instances are never generated."""
        where = f"{ptr}/{keyword}" if ptr != "/" else f"/{keyword}"
        msg = f"{self.source}: at {where}: keyword '{keyword}' {why} (a restriction: every output is valid)"
        if msg not in self.warnings:
            self.warnings.append(msg)

    def bounded_count(self, keyword: str, x: int, ptr: str) -> int | None:
        """x, or None when it is beyond the repetition limit (refused; ignored with lenient).
        A maximum past the limit is the limit (MAX_REPEAT characters or items: a restriction
        no output of a model's context comes near)."""
        if x <= MAX_REPEAT:
            return x
        if keyword.startswith("max"):
            self.restricted(keyword, ptr, f"({x:,}) is read as the compile limit of {MAX_REPEAT:,}")
            return MAX_REPEAT
        self.unsupported(keyword, ptr, f"({x:,}) is beyond the compile limit of {MAX_REPEAT:,}")
        return None

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        name, i = base, self._next_suffix.get(base, 2)
        while name in self.rules:
            name, i = f"{base}-{i}", i + 1
        self._next_suffix[base] = i
        self.rules[name] = NOTHING
        return name

    def define(self, name: str, body: Expr) -> None:
        self.rules[name] = body

    def rule(self, hint: str, body: Expr) -> RuleRef:
        name = self.fresh(hint)
        self.rules[name] = body
        return RuleRef(name)

    def marked(self, hint: str, body: Expr, mark: Mark) -> Expr:
        if not self.marking or _dead(body):
            return body
        ref = self.rule(hint, body)
        self.marks[ref.name] = mark
        return ref

    def mark(self, name: str, mark: Mark) -> None:
        if self.marking:
            self.marks[name] = mark

    @property
    def validator(self):
        if self._validator is None:
            from jsonschema import Draft202012Validator

            self._validator = exact_validator(Draft202012Validator)(
                self.resolver.root, format_checker=Draft202012Validator.FORMAT_CHECKER
            )
        return self._validator

    # ------------------------------------------------------------ whitespace

    def shared(self, name: str, body: Expr) -> RuleRef:
        """A named helper rule defined once (whitespace, strings, numbers, formats)."""
        if name not in self._shared:
            self._shared[name] = self.fresh(name)
            self.define(self._shared[name], body)
            if self.marking and name in ("ws", "space"):
                self.marks[self._shared[name]] = Mark(None, "whitespace")
        return RuleRef(self._shared[name])

    def _ws(self) -> Expr:
        if self.ws != "flexible":
            return EMPTY
        return self.shared("ws", Repeat(CharClass(((9, 10), (13, 13), (32, 32))), 0, WS_BOUND))

    def _space(self, after: str) -> Expr:
        """`after` and the spaced layout's one space (a rule marked whitespace when marking)."""
        if not self.marking:
            return Literal(after + " ")
        return seq(Literal(after), self.shared("space", Literal(" ")))

    def colon(self) -> Expr:
        if self.ws == "spaced":
            return self._space(":")
        return {"compact": Literal(":"), "pretty": Literal(": ")}.get(self.ws) or seq(
            self._ws(), Literal(":"), self._ws()
        )

    def comma(self, depth: int) -> Expr:
        if self.ws == "pretty":
            return Literal(",\n" + "  " * (depth + 1))
        if self.ws == "spaced":
            return self._space(",")
        return Literal(",") if self.ws == "compact" else seq(self._ws(), Literal(","), self._ws())

    def open_(self, depth: int) -> Expr:
        return Literal("\n" + "  " * (depth + 1)) if self.ws == "pretty" else self._ws()

    def close(self, depth: int) -> Expr:
        return Literal("\n" + "  " * depth) if self.ws == "pretty" else self._ws()

    def empty_inside(self) -> Expr:
        return self._ws() if self.ws == "flexible" else EMPTY

    def _depth_ok(self, depth: int) -> bool:
        if self.ws != "pretty" or depth < MAX_PRETTY_DEPTH:
            return True
        msg = f"{self.source}: pretty whitespace: nesting deeper than {MAX_PRETTY_DEPTH} levels is not generated"
        if msg not in self.warnings:
            self.warnings.append(msg)
        return False

    def key_depth(self, depth: int) -> int:
        return depth if self.ws == "pretty" else 0

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

    # ------------------------------------------------------------ schema nodes

    def value(self, schema: Any, ptr: str, depth: int) -> Expr:
        """The JSON text of values valid against `schema` (at JSON pointer ptr)."""
        if not self.dynamic.used:
            return self._value(schema, ptr, depth)
        saved = self._scope, self._resource, self._lost, self._here, self._merge_paths
        try:  # the dynamic scope (schema/dynamic.py): the resource of a node in its place is entered
            in_place = self._lost or self._in_place(schema, ptr)
            if not in_place:
                # a part a merge took from elsewhere: where it is, and the nodes passed on the way
                # (allOf parts, $ref targets: their resources enter the scope)
                real, path = self.dynamic.place_of(schema), self._merge_paths.get(id(schema))
                if real is not None and path is not None and path != AMBIGUOUS and self._walk(path):
                    ptr, in_place = real, True
            if in_place and not self._lost:
                self._enter(ptr)
                self._here = ptr
            elif not in_place and not (ptr == self._here and not _has_id(schema)):
                # (a node a rewrite made of the node in place here, without an $id, keeps its scope;
                # anything else made by a merge has no known place, and so no known scope)
                self._lost = True
            return self._value(schema, ptr, depth)
        finally:
            self._scope, self._resource, self._lost, self._here, self._merge_paths = saved

    def _enter(self, ptr: str) -> None:
        """Enter the resource of the node at `ptr` into the dynamic scope."""
        r = self.dynamic.resource_of(ptr)
        if r != self._resource:
            self._scope, self._resource = self.dynamic.enter(self._scope, r), r

    def _dynamic_in_merge(self, ref: str, path: tuple) -> Optional[tuple[Any, str]]:
        """The target of a `$dynamicRef` a merge reached by `path` (from the node compiled
        now), or None when a node on the way has no known place."""
        saved = self._scope, self._resource
        try:
            if self._lost or not self._walk(path):
                return None
            p, node = path[-1]
            where = p if self._in_place(node, p) else self.dynamic.place_of(node)
            if where is None:
                return None
            return self.dynamic.resolve(ref, where, self._scope)
        finally:
            self._scope, self._resource = saved

    def _walk(self, path: tuple) -> bool:
        """Enter the resources of the nodes a merge passed (False: one of them has no known place)."""
        for p, node in path:
            where = p if self._in_place(node, p) else self.dynamic.place_of(node)
            if where is not None:
                self._enter(where)
            elif _has_id(node):
                return False
        return True

    def _in_place(self, schema: Any, ptr: str) -> bool:
        """Is `schema` the node at `ptr` of the document?"""
        try:
            return self.resolver.get(ptr) is schema
        except (KeyError, IndexError, ValueError, TypeError):
            return False

    def dynamic_ref(self, schema: dict, ptr: str, depth: int) -> Expr:
        """A `$dynamicRef` (with annotations only beside it), resolved in the scope walked."""
        if self._lost:
            self.unsupported("$dynamicRef", ptr, "reached through parts merged from unknown places is not enforced")
            return self.any_value(depth)
        target, tptr = self.dynamic.resolve(schema["$dynamicRef"], ptr, self._scope)
        return self.ref_rule(target, tptr, depth)

    def _value(self, schema: Any, ptr: str, depth: int) -> Expr:
        self.at = ptr  # the deepest place reached, for "nests too deeply" messages
        if schema is True:
            return self.any_value(depth)
        if schema is False:
            return NOTHING
        if not isinstance(schema, dict):
            raise self.error(f"a schema must be an object or a boolean, not {type(schema).__name__}", ptr)
        keys = set(schema)
        if keys <= ANNOTATIONS:
            return self.any_value(depth)
        if set(schema) - ANNOTATIONS == {"$ref"}:
            return self.ref(schema["$ref"], ptr, depth)
        if set(schema) - ANNOTATIONS == {"$dynamicRef"}:
            return self.dynamic_ref(schema, ptr, depth)  # (beside other keywords: merged as a $ref is)
        if "$ref" in schema or "allOf" in schema:
            key = _shape_key(schema, self._document_ids)
            if key is not None:
                return self.merged(schema, key, ptr, depth)
        return self.merged_value(schema, ptr, depth)

    def merged(self, schema: dict, shape: Any, ptr: str, depth: int) -> Expr:
        """A `$ref` or `allOf` with keywords beside it: one rule per schema (`shape`:
        _shape_key), as `ref` makes one per target, so that a recursion through it refers
        back to the rule instead of merging the referenced schemas again without end."""
        key = (
            shape,
            self.key_depth(depth),
            ptr if self._nested_ids else "",
            (self._scope, self._lost) if self.dynamic.used else None,
        )
        if key in self._merged_rules:
            name = self._merged_rules[key]
            return NOTHING if self.rules.get(name) == NOTHING and name in self._merged_done else RuleRef(name)
        if not self._depth_ok(depth):
            return NOTHING
        name = self.fresh(("all" + ptr) if self.ws != "pretty" else f"all{ptr}-d{depth}")
        self._merged_rules[key] = name
        body = self.merged_value(schema, ptr, depth)
        self.define(name, body)
        self._merged_done.add(name)
        return body if _dead(body) else RuleRef(name)  # (no value: said plainly, for the union around it)

    def merged_value(self, schema: dict, ptr: str, depth: int) -> Expr:
        """value() of a schema object with keywords to merge, enforce or rewrite."""
        try:
            node = merge_all(schema, ptr, self.resolver)
            if self.resolver.part_paths:  # (this merge's: the parts' subschemas are compiled next)
                self._merge_paths, self.resolver.part_paths = self.resolver.part_paths, {}
        except MergeError as e:
            if e.keyword == "const" and "no instance is valid" in e.message:
                return NOTHING  # (a branch of a union: the others may hold; alone, "accepts no value")
            raise self.error(e.message, e.pointer, e.keyword) from None
        if "enum" in node or "const" in node:
            return self.enum(schema, node, ptr, depth)
        if "anyOf" in node or "oneOf" in node:
            return self.branches(node, ptr, depth)
        rewritten = self.rewrite(node, ptr)
        if rewritten is None:
            return self.typed(node, ptr, depth)
        if "anyOf" not in rewritten:
            return self.value(rewritten, ptr, depth)
        return self.branches(rewritten, ptr, depth, synthetic=True)

    def rewrite(self, node: dict, ptr: str) -> Optional[dict]:
        """`node` with `not`, `if`/`then`/`else` and schema dependencies as one `anyOf`
        (schema_logic), or None when it has none; a rewrite past the limits is refused,
        or with lenient=True the keyword is dropped."""
        original = node
        while True:
            try:
                got = self.logic.rewrite(node, ptr)
                return got if got is not None or node is original else node
            except LogicLimit as e:
                self.refuse_logic(e)
                drop = {
                    "if": ("if", "then", "else", CONDITIONS),
                    "dependentSchemas": ("dependentSchemas", "dependencies"),
                }
                node = {k: v for k, v in node.items() if k not in drop.get(e.keyword, (e.keyword,))}

    def refuse_logic(self, e: LogicLimit) -> None:
        """Refuse a LogicLimit (with lenient=True: a warning, and the keyword is not enforced)."""
        if not self.lenient:
            raise self.error(
                f"keyword '{e.keyword}' cannot be enforced: {e.why} (lenient=True ignores it)", e.pointer, e.keyword
            )
        msg = f"{self.source}: at {e.pointer}: keyword '{e.keyword}' cannot be enforced: {e.why}; ignored (lenient)"
        if msg not in self.warnings:
            self.warnings.append(msg)

    def ref(self, ref: Any, ptr: str, depth: int) -> Expr:
        target, tptr = self.resolver.resolve(ref, ptr)
        return self.ref_rule(target, tptr, depth)

    def ref_rule(self, target: Any, tptr: str, depth: int) -> Expr:
        """The rule of the schema at `tptr` (one per depth where that matters, and per
        dynamic scope where the document has `$dynamicRef`s)."""
        key = (tptr, self.key_depth(depth), self._scope if self.dynamic.used else None)
        if key in self._ref_rules:
            return RuleRef(self._ref_rules[key])
        if not self._depth_ok(depth):
            return NOTHING
        name = self.fresh(("ref" + tptr) if self.ws != "pretty" else f"ref{tptr}-d{depth}")
        self._ref_rules[key] = name
        self.define(name, self.value(target, tptr, depth))
        return RuleRef(name)

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
        return _alt(*opts)

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

    def branches(self, node: dict, ptr: str, depth: int, synthetic: bool = False) -> Expr:
        """anyOf / oneOf: the union of the branches, each with the node's other keywords;
        a oneOf's branches that may overlap each exclude the others (schema_logic).
        `synthetic`: the anyOf was made by a rewrite (its branches have no pointer)."""
        kw = "anyOf" if "anyOf" in node else "oneOf"
        subs = node[kw]
        if not isinstance(subs, list) or not subs:
            raise self.error(f"{kw} must be a non-empty array", f"{ptr}/{kw}", kw)
        rest = {k: v for k, v in node.items() if k != kw}
        if kw == "oneOf" and not self.oneof_as_anyof:
            pairs = self.disjointness.overlaps(subs, rest)
            if pairs:
                try:
                    subs = self.logic.exactly_one(subs, rest, pairs, ptr)
                except LogicLimit as e:
                    tag = self.disjointness.tag(subs, rest)
                    if tag is not None:
                        # branches told apart by the values of one property when it is there:
                        # with it there (a restriction), they share no instance, and need no
                        # exactly-one past its limits
                        subs = [{"allOf": [sub, {"required": [tag]}]} for sub in subs]
                        self.restricted(kw, ptr, f"is generated with property {tag!r} present ({e.why})")
                    else:
                        i, j = min(pairs)
                        e.why = f"branches {i} and {j} may overlap and {e.why} (oneof_as_anyof=True accepts any branch)"
                        self.refuse_logic(e)
        self._rewritten += len(subs) if synthetic else 0
        if self._rewritten > MAX_REWRITTEN_BRANCHES:
            raise self.error(
                f"the schema's not/if/oneOf rewrites need more than {MAX_REWRITTEN_BRANCHES:,} branches (the limit)",
                ptr,
                kw,
            )
        opts = []
        for i, sub in enumerate(subs):
            sptr = ptr if synthetic else f"{ptr}/{kw}/{i}"
            if not any(k not in ANNOTATIONS for k in rest):
                opts.append(self.value(sub, sptr, depth))
            else:
                opts.append(self.value({"allOf": [rest, sub]}, sptr, depth))
        return _alt(*opts)

    def typed(self, node: dict, ptr: str, depth: int) -> Expr:
        for k in node:
            if k in UNSUPPORTED and not self._harmless(k, node):
                self.unsupported(k, ptr)
        types = schema_types(node, ptr, self.error)
        ex = _excluded(node)
        if ex.strings_only:
            types &= {"string"}
        excluded = ex.values
        opts: list[Expr] = []
        if "null" in types and not any(v is None for v in excluded):
            opts.append(Literal("null"))
        if "boolean" in types:
            opts += [Literal(json.dumps(b)) for b in (True, False) if not any(v is b for v in excluded)]
        if "number" in types or "integer" in types:
            opts.append(self.number(node, ptr, integer="number" not in types))
        if "string" in types:
            opts.append(self.string(node, ptr))
        for kind, shape, empty, bound in (("array", list, [], "minItems"), ("object", dict, {}, "minProperties")):
            if kind not in types:
                continue
            listed = [v for v in excluded if isinstance(v, shape)]
            sub = node
            if listed:
                if any(v != empty for v in listed):
                    self.unsupported(
                        "not", ptr, f"of a listed {kind} value other than {json.dumps(empty)} is not enforced"
                    )
                sub = {**node, bound: max(1, node.get(bound, 0) if isinstance(node.get(bound), int) else 1)}
            opts.append(self.array(sub, ptr, depth) if kind == "array" else self.obj(sub, ptr, depth))
        return _alt(*opts)

    def _all_evaluated(self, node: dict) -> bool:
        """Does every property generated for this object node get evaluated by its own
        `properties`, `patternProperties` or `additionalProperties`?"""
        if "additionalProperties" in node:
            return True
        props, pp = node.get("properties") or {}, node.get("patternProperties") or {}
        required = node.get("required") or []
        if not (props or required or pp) or not isinstance(required, list):
            return False  # unnamed properties are generated under JSON Schema's meaning
        if isinstance(node.get("minProperties"), int) and node["minProperties"] > len(props):
            return False
        try:
            return all(r in props or any(re.search(p, str(r)) for p in pp) for r in required)
        except re.error:
            return False

    def _harmless(self, k: str, node: dict) -> bool:
        types = schema_types(node, "", self.error)
        if k in ("uniqueItems",):
            if node[k] is False or "array" not in types:
                return True
            if isinstance(node.get("maxItems"), int) and node["maxItems"] <= 1:
                return True
            if "prefixItems" in node or "contains" in node:
                return False
            return item_values(self, node.get("items", True), "/items") is not None  # enforced by the array
        if k in ("contains", "minContains", "maxContains"):
            return True  # enforced by the array (schema_contains); without `contains` the counts say nothing
        if k in ("unevaluatedItems", "additionalItems"):
            return "array" not in types
        if k in ("dependentRequired", "dependencies") and required_dependencies(node) is not None:
            return True  # enforced by the object's member machine (schema_objects)
        if k == "unevaluatedProperties" and node[k] is False and self.explicit:
            return self._all_evaluated(node)
        if k == "unevaluatedItems" and node[k] is False and self.explicit:
            return "prefixItems" in node and "items" not in node and "contains" not in node
        if k in ("dependentSchemas", "dependentRequired", "dependencies", "unevaluatedProperties"):
            return "object" not in types or node[k] in ({}, True)
        if k in ("then", "else"):
            return "if" not in node
        if k == "not":
            return native_not(node[k]) is not None  # listed values and patterns: enforced where they apply
        return False

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
        excluded = [v for v in _excluded(node).values if isinstance(v, (int, float)) and not isinstance(v, bool)]
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
        ints = _alt(*(num.int_range(a, z) for a, z in int_ranges))
        if integer:
            return ints
        return _alt(ints, *fractions(-math.inf, math.inf))

    @staticmethod
    def int_syntax() -> Expr:
        return seq(
            Repeat(Literal("-"), 0, 1),
            alt(Literal("0"), seq(CharClass(((49, 57),)), Repeat(CharClass(((48, 57),)), 0, None))),
        )

    def string(self, node: dict, ptr: str) -> Expr:
        lo, hi = 0, None
        for k in ("minLength", "maxLength"):
            if k in node:
                x = node[k]
                if isinstance(x, float) and x.is_integer():
                    x = int(x)
                if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                    raise self.error(f"{k} must be a non-negative integer", f"{ptr}/{k}", k)
                if k == "minLength":
                    lo = self.bounded_count(k, x, ptr) or 0
                else:
                    hi = self.bounded_count(k, x, ptr)
        if hi is not None and hi < lo:
            return NOTHING
        decoded: Optional[Expr] = None
        fmt = node.get("format")
        if fmt is not None and not isinstance(fmt, str):
            raise self.error("format must be a string", f"{ptr}/format", "format")
        if fmt is not None:
            if fmt in SUPPORTED_FORMATS:
                decoded = format_expr(fmt)
            elif fmt in KNOWN_UNSUPPORTED:
                self.unsupported("format", ptr, f"'{fmt}' is not enforced")
            else:
                msg = f"{self.source}: at {ptr}/format: unknown format {fmt!r} is an annotation only"
                if msg not in self.warnings:
                    self.warnings.append(msg)
        ex = _excluded(node)
        avoided = [self.searched_language(p, f"{ptr}/not/pattern") for p in ex.patterns]
        names = [v for v in ex.values if isinstance(v, str)]
        if names:
            avoided.append(alt(*(Literal(n) for n in names)))
        if avoided or node.get(PATTERNS):
            if decoded is not None:
                return _seq(Literal('"'), self.format_within(fmt, decoded, node, avoided, ptr, lo, hi), Literal('"'))
            patterns = [node.get("pattern", ""), *node.get(PATTERNS, [])]
            return _seq(Literal('"'), self.pattern_avoiding(patterns, avoided, ptr, lo, hi), Literal('"'))
        if "pattern" in node:
            if decoded is not None:
                return _seq(Literal('"'), self.format_within(fmt, decoded, node, None, ptr, lo, hi), Literal('"'))
            if lo == 0 and hi is None and isinstance(node["pattern"], str):
                return self.pattern_rule(node["pattern"], f"{ptr}/pattern")
            return _seq(Literal('"'), self.pattern(node["pattern"], f"{ptr}/pattern", lo, hi), Literal('"'))
        if decoded is None:
            if lo == 0 and hi is None:
                return self.shared("string", ANY_STRING)
            # (one rule per bound: every string of the schema with these bounds shares its
            # parser states, and so its masks)
            counted = seq(Literal('"'), Repeat(self.shared("char", COUNTED_CHAR), lo, hi), Literal('"'))
            return self.shared(f"string-{lo}-{hi if hi is not None else 'inf'}", counted)
        try:
            r = restrict_length(decoded, lo, hi)
        except LookupError:
            return NOTHING
        if r is decoded:
            return self.shared(f"format-{fmt}", seq(Literal('"'), encode_chars(r), Literal('"')))
        if r is None:
            return seq(Literal('"'), self.format_within(fmt, decoded, node, None, ptr, lo, hi), Literal('"'))
        return seq(Literal('"'), encode_chars(r), Literal('"'))

    def pattern_rule(self, pattern: str, ptr: str) -> Expr:
        """A JSON string matching `pattern`, one rule per pattern: its occurrences share
        their parser states, and so their masks."""
        key = f"pattern {pattern}"
        if key not in self._shared:
            body = _seq(Literal('"'), self.pattern(pattern, ptr, 0, None), Literal('"'))
            if _dead(body):
                return body
            self._shared[key] = self.rule("pattern", body).name
        return RuleRef(self._shared[key])

    def format_within(
        self, fmt: str, decoded: Expr, node: dict, avoided: Optional[list[Expr]], ptr: str, lo: int, hi: Optional[int]
    ) -> Expr:
        """JSON string content in format `fmt` (its language `decoded`) that also matches the
        node's `pattern`, avoids `avoided` and has `lo` to `hi` characters: one DFA x length
        product (schema_patterns), or the format alone when that is too large."""
        langs = [decoded]
        for p in [node["pattern"]] if "pattern" in node else []:
            langs.append(self.searched_language(p, f"{ptr}/pattern"))
        for p in node.get(PATTERNS, []):
            langs.append(self.searched_language(p, f"{ptr}/allOf"))
        need = frozenset(range(len(langs)))
        langs += avoided or []
        if fmt in ASCII_FORMATS:  # the other languages' characters past ASCII are never in the product
            langs = [decoded, *(below(e, 0x7F) for e in langs[1:])]
        a, b = length_bounds(decoded)
        if a >= lo and (hi is None or (b is not None and b <= hi)):
            lo, hi = 0, None  # every string of the format has an allowed length
        try:
            r = self.product(
                langs,
                lo,
                hi,
                accept=lambda label: label == need,
                max_states=MAX_FORMAT_PRODUCT_STATES,
                fits=not avoided,
            )
        except PatternTooLarge as e:
            smaller = self.format_by_budget(fmt, langs[1:], need, lo, hi)
            if smaller is not None:
                self.restricted("format", ptr, f"'{fmt}' with patterns or length bounds is a part of it ({e})")
                return smaller
            keyword = (
                "pattern"
                if "pattern" in node
                else "not"
                if avoided
                else ("maxLength" if hi is not None else "minLength")
            )
            self.unsupported(keyword, ptr, f"together with format '{fmt}' is too large to enforce ({e})")
            return encode_chars(decoded)
        return NOTHING if r is None else r

    def format_by_budget(
        self, fmt: str, others: list[Expr], need: frozenset, lo: int, hi: Optional[int]
    ) -> Optional[Expr]:
        """Where the exact product of format `fmt` with patterns (`others`) or length bounds is
        too large: a part of the format that fits (schema/budget.py), or with patterns the
        product with the format's smaller sub-language (formats.small_format_expr), its
        maximum length lowered until the product fits; None when neither does."""
        if not others:
            r = within_length(format_expr(fmt), lo, hi)
            return None if r is None else encode_chars(r)
        for top in dict.fromkeys((hi, *SHORTER_MAXIMA)):
            if (top is not None and top < lo) or (hi is not None and top is not None and top > hi):
                continue
            try:
                r = self.product(
                    [small_format_expr(fmt), *others],
                    lo,
                    top,
                    accept=lambda label: label == need,
                    max_states=2 * MAX_FORMAT_PRODUCT_STATES,
                    fits=False,
                )
            except PatternTooLarge:
                continue
            return NOTHING if r is None else r
        return None

    def product(
        self,
        langs: list[Expr],
        lo: int,
        hi: Optional[int],
        accept: Optional[Callable[[frozenset[int]], bool]] = None,
        max_states: Optional[int] = None,
        fits: bool = True,
    ) -> Optional[Expr]:
        """schema_patterns.pattern_with_length; a product with a fallback (`fits`: a part of
        the language that fits, schema_budget) within what is left of the schema's budget
        of product rules (MAX_SCHEMA_PRODUCT_RULES): past it, PatternTooLarge."""
        made = 0

        def fresh(hint: str) -> str:
            nonlocal made
            made += 1
            return self.fresh(hint)

        left = MAX_SCHEMA_PRODUCT_RULES - self._product_rules if fits else MAX_PRODUCT_RULES
        try:
            return pattern_with_length(
                langs,
                lo,
                hi,
                fresh,
                self.define,
                accept=accept,
                max_states=max_states,
                max_rules=left,
                work=self._dfa_work,
            )
        finally:
            self._product_rules += made if fits else 0

    def regex_language(self, pattern: Any, text: str, ptr: str) -> Expr:
        """The IR of `text`, a regex made from the schema's `pattern` at `ptr`."""
        from ministruct.grammar.regex.parse import parse_regex

        if not isinstance(pattern, str):
            raise self.error("pattern must be a string", ptr, "pattern")
        try:
            g = _parse_regex_anywhere(text, f"{self.source}#{ptr}")
        except GrammarSyntaxError as e:
            reason = e.reason
            if text != pattern:  # `text` wraps the pattern: say where in the pattern itself
                try:
                    parse_regex(pattern)
                except GrammarSyntaxError as own:
                    reason = own.reason
            raise self.error(f"pattern {json.dumps(pattern)} cannot be enforced: {reason}", ptr, "pattern") from None
        if len(g.rules) != 1:
            raise self.error(f"pattern {pattern!r}: unexpected multi-rule regex grammar", ptr, "pattern")
        return g.rules[g.root]

    def searched_language(self, pattern: Any, ptr: str) -> Expr:
        """The strings the schema's `pattern` at `ptr` is found in (re.search), as IR."""
        if not isinstance(pattern, str):
            raise self.error("pattern must be a string", ptr, "pattern")
        return self.regex_language(pattern, _searched(pattern), ptr)

    def pattern(self, pattern: Any, ptr: str, lo: int, hi: Optional[int]) -> Expr:
        if lo == 0 and hi is None:
            return encode_chars(self.searched_language(pattern, ptr))
        if not isinstance(pattern, str):
            raise self.error("pattern must be a string", ptr, "pattern")

        def parse(text: str) -> Expr:
            return self.regex_language(pattern, text, ptr)

        left = pattern.startswith("^")
        right = pattern.endswith("$") and (len(pattern) - len(pattern[:-1].rstrip("\\")) - 1) % 2 == 0
        core_text = pattern[1 if left else 0 : len(pattern) - 1 if right else len(pattern)]
        if _top_level_bar(core_text) or "^" in core_text.replace("[^", "") or "$" in core_text:
            return self.pattern_by_dfa(pattern, ptr, lo, hi)
        core = parse(core_text)
        try:
            if left and right:  # `$` also matches before a final newline
                opts = []
                for extra in ("", "\n"):
                    try:
                        r = restrict_length(core, max(0, lo - len(extra)), None if hi is None else hi - len(extra))
                    except LookupError:
                        continue
                    if r is None:
                        raise ValueError
                    opts.append(seq(r, Literal(extra)))
                return encode_chars(alt(*opts)) if opts else NOTHING
            if right:
                raise ValueError
            r = search_with_length(search_core(core, not left, True), left, False, lo, hi)
            if r is None:
                raise ValueError
            return encode_chars(r)
        except ValueError:
            return self.pattern_by_dfa(pattern, ptr, lo, hi)
        except LookupError:
            return NOTHING

    def pattern_avoiding(self, patterns: list[str], avoided: list[Expr], ptr: str, lo: int, hi: Optional[int]) -> Expr:
        """Strings that match every one of `patterns` ("" matches all) and none of the
        `avoided` languages (full-match), with lo..hi characters."""
        langs = [self.searched_language(p, f"{ptr}/pattern") for p in patterns]
        need = frozenset(range(len(langs)))
        try:
            r = self.product([*langs, *avoided], lo, hi, accept=lambda label: label == need, fits=False)
        except PatternTooLarge as e:
            what = "(patterns or strings to avoid)" if avoided else "(several patterns together)"
            self.unsupported("not" if avoided else "pattern", ptr, f"{what} is too large to enforce ({e})")
            if patterns[0]:
                return self.pattern(patterns[0], f"{ptr}/pattern", lo, hi)
            return Repeat(self.shared("char", COUNTED_CHAR), lo, hi)
        return NOTHING if r is None else r

    def pattern_by_budget(self, pattern: str, ptr: str, lo: int, hi: Optional[int]) -> Optional[Expr]:
        """Strings the pattern matches as a whole (re.fullmatch: it is then found in them too),
        or, without anchors, such a match followed by anything, with lo..hi characters
        (schema_budget), as JSON string content; None when none was found. (The whole
        match rather than a match anywhere: a part with one way of reading each string,
        which the engine steps cheaply, and what a writer of the pattern expects.)"""
        whole = self.regex_language(pattern, pattern, ptr)
        fitted = within_length(whole, lo, hi)
        if fitted is None and not re.search(r"\$|\\[bBZAz]", pattern):
            fitted = within_length(seq(whole, Repeat(CharClass((), negated=True), 0, None)), lo, hi)
        return None if fitted is None else encode_chars(fitted)

    def pattern_by_dfa(self, pattern: str, ptr: str, lo: int, hi: Optional[int]) -> Expr:
        """`pattern` with length bounds through a DFA x length product (see schema_patterns)."""
        try:
            r = self.product([self.searched_language(pattern, ptr)], lo, hi)
        except PatternTooLarge as e:
            fitted = self.pattern_by_budget(pattern, ptr, lo, hi)
            if fitted is not None:
                where = ptr.rsplit("/", 1)[0]
                self.restricted("pattern", where, f"with minLength/maxLength is a part of its language ({e})")
                return fitted
            self.unsupported(
                "pattern", ptr.rsplit("/", 1)[0], f"combined with minLength/maxLength is too large to enforce ({e})"
            )
            return self.pattern(pattern, ptr, 0, None)
        return NOTHING if r is None else r

    # ------------------------------------------------------------ containers

    def array(self, node: dict, ptr: str, depth: int) -> Expr:
        from ministruct.grammar.schema.objects import array_expr

        return array_expr(self, node, ptr, depth)

    def obj(self, node: dict, ptr: str, depth: int) -> Expr:
        from ministruct.grammar.schema.objects import object_expr

        return object_expr(self, node, ptr, depth)


def _object_ids(root: Any) -> set[int]:
    """The ids of the JSON objects in a document."""
    out: set[int] = set()
    stack = [root]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            out.add(id(x))
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out


MAX_SHAPE_NODES = 64


def _shape_key(schema: Any, document: set[int]) -> Any:
    """A hashable key equal for equal schemas: a document object by its id, a schema made
    while compiling (`{"allOf": [part, branch]}`) by its parts; None past MAX_SHAPE_NODES."""
    budget = [MAX_SHAPE_NODES]

    def key(x: Any) -> Any:
        if isinstance(x, (dict, list)) and id(x) in document:
            return ("doc", id(x))
        budget[0] -= 1
        if budget[0] < 0:
            raise LookupError
        if isinstance(x, dict):
            return ("{", tuple(sorted((k, key(v)) for k, v in x.items())))
        if isinstance(x, list):
            return ("[", tuple(key(v) for v in x))
        return (type(x).__name__, x)

    try:
        return key(schema)
    except (LookupError, TypeError):
        return None


def _parse_regex_anywhere(text: str, source: str) -> Grammar:
    """parse_regex, also deep inside a schema's recursion: where the stack left is too
    short for the regex parser, it parses on a fresh one (a thread of its own)."""
    import threading

    from ministruct.grammar.regex.parse import parse_regex

    try:
        return parse_regex(text, source=source)
    except GrammarSyntaxError as e:
        if e.reason != "regex nested too deeply":
            raise
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["grammar"] = parse_regex(text, source=source)
        except GrammarSyntaxError as err:
            box["error"] = err

    old = threading.stack_size(64 * 1024 * 1024)
    try:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old)
    if "error" in box:
        raise box["error"]
    return box["grammar"]


def _top_level_bar(text: str) -> bool:
    depth, i, in_class = 0, 0, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return True
        i += 1
    return False


def schema_to_grammar(
    schema: Any, options: SchemaOptions | None = None, *, source: str = "<schema>", **option_values: Any
) -> Grammar:
    """A grammar whose strings are JSON texts of instances valid against `schema`.

    `options` (or its fields as keywords: `whitespace`, `lenient`, `oneof_as_anyof`,
    `extra_properties`) are SchemaOptions; whichever is chosen, every string of the
    grammar is a valid instance.
    """
    if options is None:
        options = SchemaOptions(**option_values)
    elif option_values:
        raise UsageError("give `options` or its fields as keywords, not both", parameter="options")
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(
            f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer="/", source=source
        )
    deep = nesting_error(schema)
    if deep is not None:
        raise SchemaError(
            f"the schema nests deeper than {MAX_JSON_NESTING} levels", pointer=short_pointer(deep), source=source
        )
    odd = non_json_number(schema)
    if odd is not None:
        raise SchemaError("NaN and Infinity are not JSON numbers", pointer=odd, source=source)
    schema = bundle(schema, options.documents, source)
    refuse_ref_cycles(schema, source)
    dropped: list[str] = []
    schema = without_unevaluated(schema, source, dropped if options.lenient else None)
    c = _Compiler(schema, options, source)
    c.warnings += dropped
    c.rules["root"] = NOTHING
    c.at = "/"
    try:
        body = c.value(schema, "", 0)
    except RecursionError:
        raise SchemaError(
            "schema nests too deeply, or recurses through a $ref that has sibling keywords",
            pointer=short_pointer(c.at or "/"),
            source=source,
        ) from None
    except SchemaError:
        raise
    except Exception:  # noqa: BLE001 - re-raised below unless the schema itself is malformed
        from ministruct.grammar.schema.metaschema import check_schema

        check_schema(schema, source=source)  # a malformed schema: its metaschema names the pointer
        raise  # a well-formed schema the compiler cannot handle is a bug
    if _dead(body):
        raise SchemaError("the schema accepts no value at all", pointer="/", source=source)
    c.rules["root"] = body
    if c.marking:
        c.marks["root"] = Mark(None, "value")
    c.rules = reshape(c.rules, c.fresh)  # shared and deep expressions as rules: linear to compile
    body = c.rules["root"]
    productive = productive_rules(c.rules)
    if "root" not in productive:
        raise SchemaError("the schema accepts no finite value (its recursion never ends)", pointer="/", source=source)
    rules = prune_unproductive(c.rules, productive)  # a branch whose recursion never ends has no value
    rules = {"root": rules["root"], **{k: v for k, v in rules.items() if k != "root"}}
    marks = {k: m for k, m in c.marks.items() if k in rules}
    g = Grammar(rules, root="root", source=source, warnings=c.warnings, marks=marks)
    cycle = find_left_recursion(g)
    if cycle is not None:  # refuse_ref_cycles should have said so: never hand out a left-recursive grammar
        where = {name: ptr for (ptr, _, _), name in c._ref_rules.items()}
        ptr = next((where[n] for n in cycle if n in where), "/")
        raise SchemaError(f"the schema recurses without reading into the value ({' -> '.join(cycle)})", pointer=ptr)
    return g


def canonical_order(value: Any, schema: Any, documents: Any = ()) -> Any:
    """`value` with object keys reordered to the layout the grammar generates (with
    `documents` as SchemaOptions.documents for the schema's remote references)."""
    from ministruct.grammar.schema.documents import normalize_documents
    from ministruct.grammar.schema.objects import reorder

    try:
        schema = without_unevaluated(bundle(schema, normalize_documents(documents)))
    except SchemaError:
        pass  # (a schema the compiler refuses: any order will do)
    return reorder(value, schema, Resolver(schema, lambda m, p, k=None: SchemaError(m, pointer=p, keyword=k)), "")

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

This module walks the schema's nodes (references, merges, rewrites, unions, types); the
compiler's other parts are writer.py (rules, warnings, the layout's punctuation),
values.py (any value, enum/const, numbers), strings.py (lengths, format, pattern),
dynamic.py (the dynamic scope) and objects.py (arrays and objects).
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from ministruct.errors import SchemaError, UsageError
from ministruct.grammar.analysis import find_left_recursion, productive_rules, prune_unproductive
from ministruct.grammar.ir import NOTHING, Expr, Grammar, Literal, Mark, RuleRef, gc_paused
from ministruct.grammar.json_text import non_json_number
from ministruct.grammar.limits import MAX_JSON_NESTING, mark_reshaped, nesting_error, reshape_sized, short_pointer
from ministruct.grammar.schema.complement import MAX_DFA_WORK
from ministruct.grammar.schema.contains import item_values
from ministruct.grammar.schema.cycles import refuse_ref_cycles
from ministruct.grammar.schema.disjoint import Disjointness
from ministruct.grammar.schema.documents import bundle
from ministruct.grammar.schema.dynamic import EMPTY_SCOPE, Dynamic, DynamicScope, has_id
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.logic import Logic, LogicLimit, native_not
from ministruct.grammar.schema.merge import (
    AMBIGUOUS,
    CONDITIONS,
    KEY_PARTS,
    MergeError,
    Resolver,
    merge_all,
    schema_types,
)
from ministruct.grammar.schema.objects import required_dependencies
from ministruct.grammar.schema.options import SchemaOptions
from ministruct.grammar.schema.strings import Strings
from ministruct.grammar.schema.unevaluated import without_unevaluated
from ministruct.grammar.schema.unique import unique_refusal
from ministruct.grammar.schema.values import Values, excluded_by_not
from ministruct.grammar.schema.writer import alt_known, dead

__all__ = ["schema_to_grammar", "canonical_order", "SchemaError"]

MAX_REWRITTEN_BRANCHES = 4000  # branches made by not/if/oneOf rewrites in one schema

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


class _Compiler(Values, Strings, DynamicScope):
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
        self._avoiding_made: dict[tuple, Expr] = {}  # Strings.pattern_avoiding: products made
        self._merged_rules: dict[tuple, str] = {}
        self.multiples_made: dict[tuple, Optional[Expr]] = {}  # schema_multiples: machines made
        self.multiple_states = 0  # and their states together
        self.keys_made: dict[tuple, Expr] = {}  # schema_keys.not_in_names: keys other than names
        self._merged_done: set[str] = set()
        self._document_ids = _object_ids(root)  # the schema objects of the document (kept alive by it)
        self._nested_ids = len(set(self.resolver.bases.values())) > 1  # where a $ref sits decides its target
        self.rules: dict[str, Expr] = {}
        self.warnings: list[str] = []
        self.not_enforced: list[str] = []
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
            elif not in_place and not (ptr == self._here and not has_id(schema)):
                # (a node a rewrite made of the node in place here, without an $id, keeps its scope;
                # anything else made by a merge has no known place, and so no known scope)
                self._lost = True
            return self._value(schema, ptr, depth)
        finally:
            self._scope, self._resource, self._lost, self._here, self._merge_paths = saved

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
        return body if dead(body) else RuleRef(name)  # (no value: said plainly, for the union around it)

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
            kw = "anyOf" if "anyOf" in node else "oneOf"
            if schema.get(kw) == node[kw]:
                return self.branches(node, ptr, depth)
            # (a list the merge made, from the allOf's lists: its branches are no place in the schema)
            return self.branches(node, f"{ptr}/allOf" if "allOf" in schema else ptr, depth, merged=True)
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
        self.ignore(
            e.pointer,
            f"{self.source}: at {e.pointer}: keyword '{e.keyword}' cannot be enforced: {e.why}; ignored (lenient)",
        )

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

    def branches(self, node: dict, ptr: str, depth: int, synthetic: bool = False, merged: bool = False) -> Expr:
        """anyOf / oneOf: the union of the branches, each with the node's other keywords;
        a oneOf's branches that may overlap each exclude the others (schema_logic).
        `synthetic`: the anyOf was made by a rewrite, `merged`: the list by a merge of an allOf's
        lists (either way its branches have no pointer of their own)."""
        kw = "anyOf" if "anyOf" in node else "oneOf"
        subs = node[kw]
        if not isinstance(subs, list) or not subs:
            raise self.error(f"{kw} must be a non-empty array", f"{ptr}/{kw}", kw)
        rest = {k: v for k, v in node.items() if k != kw}
        if kw == "oneOf" and not self.oneof_as_anyof:
            pairs = self.disjointness.overlaps(subs, rest)
            if pairs:
                try:
                    subs = self.logic.exactly_one(subs, rest, pairs, ptr, branch_ptrs=not (synthetic or merged))
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
                        which = "combinations of the allOf's lists" if merged else f"branches {i} and {j}"
                        e.why = f"{which} may overlap and {e.why} (oneof_as_anyof=True accepts any branch)"
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
            sptr = ptr if synthetic or merged else f"{ptr}/{kw}/{i}"
            if not any(k not in ANNOTATIONS for k in rest):
                opts.append(self.value(sub, sptr, depth))
            else:
                opts.append(self.value({"allOf": [rest, sub]}, sptr, depth))
        return alt_known(*opts)

    def typed(self, node: dict, ptr: str, depth: int) -> Expr:
        for k in node:
            if k in UNSUPPORTED and not self._harmless(k, node):
                self.unsupported(k, ptr, unique_refusal(node) if k == "uniqueItems" else "is not enforced")
        types = schema_types(node, ptr, self.error)
        ex = excluded_by_not(node)
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
        return alt_known(*opts)

    def _all_evaluated(self, node: dict) -> bool:
        """Does every property generated for this object node get evaluated by its own
        `properties`, `patternProperties` or `additionalProperties`?"""
        if "additionalProperties" in node:
            return True
        if KEY_PARTS in node:
            return False  # (merged parts' extras: whether their parts evaluate them is not kept)
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
    # (what a compile makes is mostly the grammar, kept as long as the constraint: the cyclic
    # collector's passes over it during the compile free nothing, 0.1 ms each)
    with gc_paused():
        return _schema_grammar(schema, options, source)


def _schema_grammar(schema: Any, options: SchemaOptions, source: str) -> Grammar:
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
    dropped: list[tuple[str, str]] = []  # (pointer, warning)
    schema = without_unevaluated(schema, source, dropped if options.lenient else None)
    c = _Compiler(schema, options, source)
    for where, message in dropped:
        c.ignore(where, message)
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
    if dead(body):
        raise SchemaError("the schema accepts no value at all", pointer="/", source=source)
    c.rules["root"] = body
    if c.marking:
        c.marks["root"] = Mark(None, "value")
    c.rules, size = reshape_sized(c.rules, c.fresh)  # shared and deep expressions as rules: linear to compile
    body = c.rules["root"]
    productive = productive_rules(c.rules)
    if "root" not in productive:
        raise SchemaError("the schema accepts no finite value (its recursion never ends)", pointer="/", source=source)
    rules = prune_unproductive(c.rules, productive)  # a branch whose recursion never ends has no value
    unchanged = rules is c.rules  # (then still as reshape left it: Constraint's bounded() need not again)
    rules = {"root": rules["root"], **{k: v for k, v in rules.items() if k != "root"}}
    if unchanged:
        mark_reshaped(rules, size)
    marks = {k: m for k, m in c.marks.items() if k in rules}
    g = Grammar(rules, root="root", source=source, warnings=c.warnings, marks=marks, not_enforced=c.not_enforced)
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

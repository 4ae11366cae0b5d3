"""`$ref` cycles that never read into the value: `{"$defs": {"a": {"$ref": "#/$defs/b"},
"b": {"$ref": "#/$defs/a"}}}` reached from the root.

Such a cycle applies a schema to the same value again and again: JSON Schema leaves its
meaning undefined (2020-12 Core, "$ref" and infinite recursion), a validator recurses
until it gives up, and a grammar built from it is left-recursive (llama.cpp crashes on
it). Both the grammar compiler and the instance check refuse it, naming the pointer.
"""

from __future__ import annotations

from typing import Any, Iterator

from ministruct.errors import SchemaError
from ministruct.grammar.analysis import first_cycle
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.merge import Resolver

# keywords whose subschemas apply to the value itself (not to a part of it)
IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
IN_PLACE_ONE = ("not", "if", "then", "else")
IN_PLACE_MAPS = ("dependentSchemas",)
# keywords whose values are not schemas, or schemas reached only through a $ref
NOT_APPLIED = ANNOTATIONS | {"enum", "const"}


def in_place_ref_cycle(schema: Any, resolver: Resolver | None = None) -> list[str] | None:
    """The pointers of a cycle of in-place subschemas reached from the root, through a
    `$ref` (first == last), or None."""
    if not isinstance(schema, dict):
        return None
    res = resolver or Resolver(schema, lambda m, p, k=None: SchemaError(m, pointer=p, keyword=k))
    return first_cycle(_applied(res), lambda ptr: _in_place(res.get(ptr), ptr, res))


def _applied(res: Resolver) -> Iterator[str]:
    """Every schema node applied somewhere below the root (the root first)."""
    todo, seen = [""], {""}
    while todo:
        ptr = todo.pop()
        yield ptr
        for child in _all_subschemas(res.get(ptr), ptr, res):
            if child not in seen:
                seen.add(child)
                todo.append(child)


def refuse_ref_cycles(schema: Any, source: str, resolver: Resolver | None = None) -> None:
    """SchemaError naming the first node of an in-place `$ref` cycle, if there is one."""
    cycle = in_place_ref_cycle(schema, resolver)
    if cycle is not None:
        path = " -> ".join(p or "/" for p in cycle)
        raise SchemaError(
            f"a $ref cycle that never reads into the value ({path}): its meaning is undefined",
            pointer=cycle[0] or "/",
            keyword="$ref",
            source=source,
        )


def _in_place(node: Any, ptr: str, res: Resolver) -> Iterator[str]:
    """The pointers of the subschemas that apply to the same value as `node`."""
    if not isinstance(node, dict):
        return
    for k in ("$ref", "$dynamicRef", "$recursiveRef"):
        if isinstance(node.get(k), str):
            try:
                yield res.resolve(node[k], ptr)[1]
            except SchemaError:
                pass  # a $ref that points nowhere is the compiler's and validator's to report
    for k in IN_PLACE_LISTS:
        if isinstance(node.get(k), list):
            yield from (f"{ptr}/{k}/{i}" for i in range(len(node[k])))
    for k in IN_PLACE_ONE:
        if k in node:
            yield f"{ptr}/{k}"
    for k in IN_PLACE_MAPS:
        if isinstance(node.get(k), dict):
            yield from (f"{ptr}/{k}/{pointer_token(name)}" for name in node[k])


def _all_subschemas(node: Any, ptr: str, res: Resolver) -> Iterator[str]:
    """Every subschema `node` applies (in place or to a part of the value), `$ref` targets included."""
    yield from _in_place(node, ptr, res)
    if not isinstance(node, dict):
        return
    for k, v in node.items():
        if k in NOT_APPLIED or k in IN_PLACE_LISTS or k in IN_PLACE_ONE:
            continue
        where = f"{ptr}/{pointer_token(k)}"
        if isinstance(v, dict):
            if k in ("properties", "patternProperties", "dependentSchemas"):
                yield from (f"{where}/{pointer_token(name)}" for name in v)
            else:
                yield where
        elif isinstance(v, list) and k in ("prefixItems", "items"):
            yield from (f"{where}/{i}" for i in range(len(v)))

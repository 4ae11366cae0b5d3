"""`$dynamicRef` / `$dynamicAnchor` (draft 2020-12) resolved in the dynamic scope the
compiler walks.

The dynamic scope of a schema node is the list of schema resources (a document's root,
every subschema with an `$id`) that evaluation passed through to reach it, outermost
first: entering any node of a resource enters the resource. A `$dynamicRef` first
resolves as a `$ref` would; when its fragment is a name and the node it reaches carries
`$dynamicAnchor` with that name, it goes instead to the `$dynamicAnchor` of that name in
the outermost resource of the scope that has one. So what a `$dynamicRef` means depends
only on the bindings "name -> the outermost resource's anchor" of the scope, which grow
as resources are entered (the first binding of a name stays): the compiler carries
them as a `Scope` and keys the rules of references by it, so a schema reached under two
scopes is compiled once per scope (finitely many: one binding per name and resource).
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Optional

from ministruct.errors import SchemaError
from ministruct.grammar.ir import Expr
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.merge import Resolver, join_uri

Scope = frozenset  # of (anchor name, pointer of the node carrying it)
EMPTY_SCOPE: Scope = frozenset()


class Dynamic:
    """The resources and dynamic anchors of one document, and how a scope grows."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.roots: dict[str, str] = {}  # resource pointer -> its base URI
        self.anchors: dict[str, dict[str, str]] = {}  # resource pointer -> {name: node pointer}
        self.names: set[str] = set()  # names some $dynamicRef may look up
        self.used = False
        self._places: dict[int, Optional[str]] = {}  # id of a schema object of the document -> its pointer
        self._scan(resolver.root, "", resolver.root_doc, "")

    def place_of(self, node: Any) -> Optional[str]:
        """The pointer of `node` when it is an object of the document (a merge keeps the
        document's subschemas as they are), else None."""
        return self._places.get(id(node)) if isinstance(node, dict) else None

    def _scan(self, node: Any, ptr: str, base: str, resource: str) -> None:
        if isinstance(node, dict):
            if self._places.setdefault(id(node), ptr) != ptr:
                self._places[id(node)] = None  # one object in two places (a schema built in code)
            if ptr == "" or isinstance(node.get("$id"), str):
                if isinstance(node.get("$id"), str):
                    base = urllib.parse.urldefrag(join_uri(base, node["$id"]))[0]
                resource = ptr
                self.roots[ptr] = base
                self.anchors.setdefault(ptr, {})
            if isinstance(node.get("$dynamicAnchor"), str):
                self.anchors[resource].setdefault(node["$dynamicAnchor"], ptr)
            if isinstance(node.get("$dynamicRef"), str):
                self.used = True
                frag = urllib.parse.urldefrag(node["$dynamicRef"])[1]
                if frag and not frag.startswith("/"):
                    self.names.add(frag)
            for k, v in node.items():
                if k not in ("enum", "const", "default", "examples", "example"):
                    self._scan(v, f"{ptr}/{pointer_token(k)}", base, resource)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._scan(v, f"{ptr}/{i}", base, resource)

    def resource_of(self, ptr: str) -> str:
        """The pointer of the resource the node at `ptr` belongs to."""
        best = ""
        for r in self.roots:
            if (ptr == r or ptr.startswith(r + "/")) and len(r) > len(best):
                best = r
        return best

    def enter(self, scope: Scope, resource: str) -> Scope:
        """`scope` after entering `resource`: its anchors of names not bound yet."""
        bound = {name for name, _ in scope}
        new = [(n, p) for n, p in self.anchors.get(resource, {}).items() if n in self.names and n not in bound]
        return scope | frozenset(new) if new else scope

    def resolve(self, ref: str, ptr: str, scope: Scope) -> tuple[Any, str]:
        """(target, its pointer) of the `$dynamicRef` `ref` in the node at `ptr` under `scope`."""
        try:
            target, tptr = self.resolver.resolve(ref, ptr)
        except SchemaError as e:
            raise SchemaError(
                e.reason.replace("$ref", "$dynamicRef", 1),
                pointer=f"{ptr}/$dynamicRef",
                keyword="$dynamicRef",
                source=e.source,
            ) from None
        frag = urllib.parse.urldefrag(ref)[1]
        if not frag or frag.startswith("/") or not isinstance(target, dict) or target.get("$dynamicAnchor") != frag:
            return target, tptr  # no bookend: a plain $ref
        bound: Optional[str] = dict(scope).get(frag)
        if bound is None:
            return target, tptr
        return self.resolver.get(bound), bound


def has_id(node: Any) -> bool:
    return isinstance(node, dict) and "$id" in node


class DynamicScope:
    """The compiler's walk of the dynamic scope: resources entered, `$dynamicRef`s
    resolved in it (the attributes and `ref_rule` are the compiler's)."""

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
            elif has_id(node):
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

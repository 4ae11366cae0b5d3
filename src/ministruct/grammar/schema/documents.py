"""Schema documents given for URIs, and remote `$ref`s bundled into one document.

Nothing is fetched from the network. A remote `$ref` (one whose document is neither the
schema nor a resource inside it) is found only in the documents the caller gives
(SchemaOptions.documents, the CLI's `--schema-documents`): a map from a URI, or a URI
prefix ending in `/`, to a schema (a dict or a boolean), a JSON file, or a directory
whose relative paths follow the prefix (`http://localhost:1234/` -> `remotes/` gives
`http://localhost:1234/draft2020-12/integer.json` from `remotes/draft2020-12/integer.json`).

`bundle` embeds each document reached this way in the schema, under
`$defs/ministruct:<uri>`, as JSON Schema's compound documents do (2020-12 Core 9.3): an
embedded resource keeps its own `$id`, or takes the URI it was found at; a `$ref` to a
document whose own `$id` differs is written to that `$id`. The compiler then resolves
every reference inside the one document.
"""

from __future__ import annotations

import copy
import json
import urllib.parse
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ministruct.errors import SchemaError, UsageError
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.merge import join_uri, node_at

REF_KEYWORDS = ("$ref", "$dynamicRef")
PREFIX = "ministruct:"
MAX_DOCUMENTS = 256


def normalize_documents(documents: Any) -> tuple[tuple[str, str, str], ...]:
    """SchemaOptions.documents as a tuple of (URI or prefix, "path" or "json", a path or a
    schema's JSON text), sorted longest URI first (given in that form, kept as it is);
    UsageError naming `documents` when malformed."""
    if documents is None or documents == ():
        return ()
    if isinstance(documents, Mapping):
        items = list(documents.items())
    elif isinstance(documents, (list, tuple)):
        items = list(documents)
    else:
        raise UsageError("documents must map URIs to files, directories or schemas", parameter="documents")
    out = []
    for item in items:
        if isinstance(item, tuple) and len(item) == 3 and item[1] in ("path", "json"):
            out.append(item)  # (already in this form)
            continue
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
            raise UsageError("documents must map URIs to files, directories or schemas", parameter="documents")
        uri, where = item
        if urllib.parse.urlsplit(uri).scheme == "":
            raise UsageError(f"documents: {uri!r} is not an absolute URI", parameter="documents")
        if isinstance(where, (dict, bool)):
            out.append((uri, "json", json.dumps(where, sort_keys=True)))
        elif isinstance(where, (str, Path)):
            out.append((uri, "path", str(where)))
        else:
            raise UsageError(f"documents: {uri!r} maps to neither a path nor a schema", parameter="documents")
    return tuple(sorted(out, key=lambda x: -len(x[0])))


def load_document(documents: tuple[tuple[str, str, str], ...], uri: str) -> tuple[bool, Any]:
    """(found, schema) for the document at `uri` (no fragment) among `documents`."""
    for key, kind, where in documents:
        if key.endswith("/") and uri.startswith(key):
            rest = uri[len(key) :]
        elif uri == key:
            rest = ""
        else:
            continue
        if kind == "json":
            if rest:
                continue
            return True, json.loads(where)
        path = Path(where)
        if rest:
            parts = [urllib.parse.unquote(p) for p in rest.split("/")]
            if any(p in ("..", ".") for p in parts):
                continue
            path = path.joinpath(*parts)
        if path.is_file():
            try:
                return True, json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise SchemaError(f"the document for {uri} ({path}) is not JSON: {e}", pointer="/") from None
    return False, None


def _refs(node: Any, ptr: str, base: str) -> Iterator[tuple[str, str, str, str]]:
    """(pointer of the node, keyword, its reference, the base URI there) of every reference."""
    if isinstance(node, dict):
        if isinstance(node.get("$id"), str):
            base = urllib.parse.urldefrag(join_uri(base, node["$id"]))[0]
        for k in REF_KEYWORDS:
            if isinstance(node.get(k), str):
                yield ptr, k, node[k], base
        for k, v in node.items():
            if k not in ("enum", "const", "default", "examples", "example"):
                yield from _refs(v, f"{ptr}/{pointer_token(k)}", base)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _refs(v, f"{ptr}/{i}", base)


def _ids(node: Any, base: str, out: set) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("$id"), str):
            base = urllib.parse.urldefrag(join_uri(base, node["$id"]))[0]
            out.add(base)
        for k, v in node.items():
            if k not in ("enum", "const", "default", "examples", "example"):
                _ids(v, base, out)
    elif isinstance(node, list):
        for v in node:
            _ids(v, base, out)


def bundle(schema: Any, documents: tuple[tuple[str, str, str], ...], source: str = "<schema>") -> Any:
    """`schema` with the documents its remote references reach embedded (a copy; the
    schema itself when it reaches none)."""
    if not documents or not isinstance(schema, dict):
        return schema
    out: Optional[dict] = None
    aliases: dict[str, str] = {}  # a URI a document was found at -> its own $id
    while True:
        doc = out if out is not None else schema
        root_id = doc.get("$id") if isinstance(doc.get("$id"), str) else ""
        known: set = {urllib.parse.urldefrag(root_id)[0]} if root_id else set()
        _ids(doc, urllib.parse.urldefrag(root_id)[0], known)
        wanted = []
        for ptr, kw, ref, base in _refs(doc, "", ""):
            full = join_uri(base, ref)
            uri = urllib.parse.urldefrag(full)[0]
            if uri and uri not in known and uri not in aliases and uri not in wanted:
                wanted.append(uri)
        added = False
        for uri in wanted:
            found, got = load_document(documents, uri)
            if not found:
                continue  # the compiler says the reference is remote and not given
            if out is None:
                out = copy.deepcopy(schema)
            defs = out.setdefault("$defs", {})
            if not isinstance(defs, dict):
                raise SchemaError("$defs must be an object", pointer="/$defs", source=source)
            if len(defs) > MAX_DOCUMENTS:
                raise SchemaError(f"more than {MAX_DOCUMENTS} documents referenced", pointer="/$defs", source=source)
            if isinstance(got, bool):
                got = {} if got else {"not": {}}
            if not isinstance(got, dict):
                raise SchemaError(f"the document for {uri} is not a schema", pointer="/", source=source)
            node = copy.deepcopy(got)
            own = node.get("$id")
            if isinstance(own, str) and urllib.parse.urldefrag(join_uri(uri, own))[0] != uri:
                aliases[uri] = urllib.parse.urldefrag(join_uri(uri, own))[0]
                node["$id"] = aliases[uri]
            else:
                node["$id"] = uri
            defs[PREFIX + uri] = node
            added = True
        if not added:
            break
    if out is None:
        return schema
    if aliases:  # references to where a document was found go to its own $id
        for ptr, kw, ref, base in list(_refs(out, "", "")):
            full = join_uri(base, ref)
            uri, frag = urllib.parse.urldefrag(full)
            if uri in aliases:
                node_at(out, ptr)[kw] = aliases[uri] + (f"#{frag}" if frag else "")
    return out


def document_registry(documents: Any) -> Any:
    """A `referencing.Registry` that finds the `documents` (SchemaOptions.documents' forms)
    by URI, for the instance check's validator; None when there are none."""
    docs = normalize_documents(documents)
    if not docs:
        return None
    from referencing import Registry, Resource
    from referencing.exceptions import NoSuchResource
    from referencing.jsonschema import DRAFT202012

    def retrieve(uri: str) -> Any:
        found, got = load_document(docs, uri)
        if not found:
            raise NoSuchResource(ref=uri)
        return Resource.from_contents(got, default_specification=DRAFT202012)

    return Registry(retrieve=retrieve)  # type: ignore[call-arg]

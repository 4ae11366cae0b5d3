"""Lark's LALR parsers (the GBNF, Lark and regex front ends), built once per machine.

Building a parser table costs every process 30-60 ms; loading a stored one, a few. A
table is stored as JSON under the cache folder (`cache_root() / "lark"`), keyed by the
grammar text, the options, the lexer class and Lark's version, with a SHA-256 of its
body: data only, no pickle and no code (the lexer class and the transformer are given
again on loading). A missing, damaged or foreign file is rebuilt (and a damaged one
replaced). The same folder holds the engine's cache (engine/cache.py), which takes
`cache_root` and `write_atomic` from here.

Location: $MINISTRUCT_CACHE_DIR, else the user cache directory; MINISTRUCT_NO_CACHE=1
turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from lark import Lark

FORMAT = "ministruct-lark-table-1"
_TAGS = ("~dict", "~tuple")  # JSON stand-ins for dicts with non-string keys, and tuples


def cache_root() -> Path | None:
    """The folder every on-disk cache of ministruct lives under, or None when caching is off."""
    if os.environ.get("MINISTRUCT_NO_CACHE") == "1":
        return None
    base = os.environ.get("MINISTRUCT_CACHE_DIR")
    if not base:
        import platformdirs

        base = platformdirs.user_cache_dir("ministruct")
    return Path(base)


def lalr_parser(text: str, *, lexer: type, transformer: Any = None, **options: Any) -> "Lark":
    """`Lark(text, parser="lalr", lexer=lexer, transformer=transformer, **options)`, its
    table loaded from the cache folder when an earlier process stored it."""
    from lark import Lark

    path = _path(text, lexer, options)
    if path is not None:
        loaded = _load(path, lexer, transformer)
        if loaded is not None:
            return loaded
    parser = Lark(text, parser="lalr", lexer=lexer, transformer=transformer, **options)
    if path is not None:
        _store(parser, path)
    return parser


def _path(text: str, lexer: type, options: dict[str, Any]) -> Path | None:
    root = cache_root()
    if root is None:
        return None
    import lark

    what = [FORMAT, lark.__version__, f"{lexer.__module__}.{lexer.__qualname__}", text, sorted(options.items())]
    key = hashlib.sha256(json.dumps(what, default=repr).encode()).hexdigest()[:32]
    return root / "lark" / f"{key}.json"


def _load(path: Path, lexer: type, transformer: Any) -> "Lark | None":
    from lark import Lark

    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        digest, body = raw.split(b"\n", 1)
        if hashlib.sha256(body).hexdigest().encode() != digest:
            raise ValueError("checksum mismatch")
        stored = _decode(json.loads(body))
        if stored["format"] != FORMAT:
            raise ValueError("foreign format")
        data, memo = stored["data"], stored["memo"]
        data["options"]["lexer"] = lexer
        data["parser"]["lexer_conf"]["lexer_type"] = lexer
        extra = {"transformer": transformer} if transformer is not None else {}
        return Lark._load_from_dict(data, memo, **extra)
    except Exception:  # damaged or written by another version: build it again
        _remove(path)
        return None


def _store(parser: "Lark", path: Path) -> None:
    from lark.grammar import Rule
    from lark.lexer import TerminalDef

    data, memo = parser.memo_serialize([TerminalDef, Rule])
    try:
        body = json.dumps({"format": FORMAT, "data": _encode(data), "memo": _encode(memo)}).encode()
    except TypeError:  # something in the table that is not plain data: not stored
        return
    write_atomic(path, [hashlib.sha256(body).hexdigest().encode(), b"\n", body])


def write_atomic(path: Path, pieces: Iterable[bytes]) -> None:
    """Write `pieces` to `path` through a temporary file beside it, so that a reader sees the
    old file or the whole new one; failures (a read-only or full disk) only cost the cache."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            for p in pieces:
                f.write(p)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            _remove(Path(tmp))


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _encode(x: Any) -> Any:
    """Lark's serialized table as JSON values; classes and transformer objects (given
    again on loading) become null, anything else that is not plain data is a TypeError."""
    if isinstance(x, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in x):
            return {k: _encode(v) for k, v in x.items()}
        return {"~dict": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if isinstance(x, tuple):
        return {"~tuple": [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    if isinstance(x, type) or _is_transformer(x):
        return None
    raise TypeError(f"not plain data: {type(x).__name__}")


def _decode(x: Any) -> Any:
    if isinstance(x, dict):
        if len(x) == 1 and "~dict" in x:
            return {_decode(k): _decode(v) for k, v in x["~dict"]}
        if len(x) == 1 and "~tuple" in x:
            return tuple(_decode(v) for v in x["~tuple"])
        return {k: _decode(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


def _is_transformer(x: Any) -> bool:
    from lark import Transformer

    return isinstance(x, Transformer)

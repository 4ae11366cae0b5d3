"""On-disk cache of vocabularies, token tries and compiled-grammar state: data, never code.

An entry is one file: a magic string, a JSON header (small metadata, and the name,
dtype, shape and offset of every array), the header's CRC-32, then the raw arrays,
each 64-byte aligned, whose CRC-32 is in the header. Loading reads no pickle and runs
no code: arrays come back as read-only views of a memory map (or of the file's
bytes), with only plain numeric dtypes accepted. A missing, truncated, damaged or
foreign entry is deleted and reported as absent, so the caller rebuilds it.

Keys hash everything a cached value depends on: the vocabulary's fingerprint, the
grammar's canonical text and rule order, and the source code of the engine modules
themselves, so an entry is never stale. Entries are written atomically.

Location: $MINISTRUCT_CACHE_DIR, else the user cache directory; MINISTRUCT_NO_CACHE=1
turns it off. Size: entries of older engine versions (or grammars no longer used) are
never read again, so past $MINISTRUCT_CACHE_MAX_MB (default MAX_BYTES) the least recently
used entries are deleted whenever one is written (`load` marks an entry used).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ministruct.grammar.ir import Grammar
from ministruct.grammar.parser_cache import cache_root, write_atomic

# what shapes the cached data: every module of the engine, and the IR and analysis it compiles
_GRAMMAR_MODULES = ("ir.py", "analysis.py")
MAGIC = b"MINISTRUCT-CACHE-1\n"
MAX_BYTES = 2 * 1024**3
ALIGN = 64
SUFFIX = ".msc"
_DTYPES = frozenset({"|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f4", "<f8"})


@dataclass(frozen=True)
class Entry:
    """A loaded entry: read-only arrays by name, and the JSON metadata."""

    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]


@lru_cache(maxsize=1)
def engine_version() -> str:
    """A hash of the engine's own source: any code change invalidates old entries."""
    h = hashlib.sha256()
    for path in engine_sources():
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def engine_sources() -> list[Path]:
    """The source files whose code shapes what the cache holds."""
    here = Path(__file__).resolve().parent
    grammar = here.parent / "grammar"
    return sorted(here.glob("*.py")) + [grammar / name for name in _GRAMMAR_MODULES]


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is turned off."""
    root = cache_root()
    return None if root is None else root / "engine"


def grammar_key(grammar: Grammar, vocab_fingerprint: str) -> str:
    h = hashlib.sha256()
    marks = "\x00".join(f"{n}={m.segment}:{m.part}" for n, m in sorted(grammar.marks.items()))
    for part in (
        engine_version(),
        vocab_fingerprint,
        grammar.root,
        "\x00".join(grammar.rules),
        grammar.to_gbnf(),
        marks,
        grammar.lexer.key() if grammar.lexer is not None else "cfl",
    ):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.hexdigest()[:32]


def trie_key(vocab_fingerprint: str) -> str:
    return hashlib.sha256(f"{engine_version()}|trie|{vocab_fingerprint}".encode()).hexdigest()[:32]


def lengths_key(vocab_fingerprint: str, slice_name: str, ranges: tuple[tuple[int, int], ...]) -> str:
    text = f"{engine_version()}|lengths|{vocab_fingerprint}|{slice_name}|{ranges}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def entry_path(kind: str, key: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / kind / f"{key}{SUFFIX}"


# ---------------------------------------------------------------- format


def _pad(n: int) -> int:
    return (-n) % ALIGN


def encode(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> list[bytes | memoryview]:
    """The pieces of an entry file, in order."""
    specs, chunks, offset, crc = [], [], 0, 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        if a.dtype.str not in _DTYPES:
            raise TypeError(f"cache arrays must be plain numbers, not {a.dtype} ({name})")
        data = memoryview(a).cast("B") if a.size else memoryview(b"")
        specs.append({"name": name, "dtype": a.dtype.str, "shape": list(a.shape), "offset": offset})
        pad = b"\x00" * _pad(a.nbytes)
        for part in (data, pad):
            crc = zlib.crc32(part, crc)
            chunks.append(part)
        offset += a.nbytes + len(pad)
    header = json.dumps({"meta": meta, "arrays": specs, "size": offset, "crc": crc}).encode()
    head = MAGIC + struct.pack("<QI", len(header), zlib.crc32(header)) + header
    return [head, b"\x00" * _pad(len(head)), *chunks]


def decode(buf: Any) -> Entry:
    """Parse an entry from a buffer (bytes or mmap); ValueError when it is not a whole, intact one."""
    view = memoryview(buf)
    n0 = len(MAGIC) + 12
    if len(view) < n0 or bytes(view[: len(MAGIC)]) != MAGIC:
        raise ValueError("not a ministruct cache entry")
    hlen, hcrc = struct.unpack("<QI", view[len(MAGIC) : n0])
    if n0 + hlen > len(view):
        raise ValueError("truncated header")
    header = bytes(view[n0 : n0 + hlen])
    if zlib.crc32(header) != hcrc:
        raise ValueError("header checksum mismatch")
    info = json.loads(header)
    start = n0 + hlen + _pad(n0 + hlen)
    size = int(info["size"])
    if start + size != len(view):
        raise ValueError("wrong length (truncated or extended)")
    payload = view[start:]
    if zlib.crc32(payload) != int(info["crc"]):
        raise ValueError("payload checksum mismatch")
    arrays: dict[str, np.ndarray] = {}
    for spec in info["arrays"]:
        dtype = str(spec["dtype"])
        if dtype not in _DTYPES:
            raise ValueError(f"unexpected dtype {dtype!r}")
        shape = tuple(int(x) for x in spec["shape"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        off = int(spec["offset"])
        nbytes = count * np.dtype(dtype).itemsize
        if off < 0 or off + nbytes > size:
            raise ValueError("array outside the payload")
        a = np.frombuffer(buf, dtype=dtype, count=count, offset=start + off).reshape(shape)
        if a.flags.writeable:
            a.setflags(write=False)
        arrays[str(spec["name"])] = a
    meta = info["meta"]
    if not isinstance(meta, dict):
        raise ValueError("metadata is not an object")
    return Entry(arrays, meta)


# ---------------------------------------------------------------- load / save


def load(kind: str, key: str, *, mapped: bool = True) -> Entry | None:
    """The cached entry, or None if absent; a damaged entry is deleted and reported absent.

    mapped=True returns views of a memory map (pages are read on use)."""
    path = entry_path(kind, key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            if mapped:
                try:
                    buf: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except ValueError:  # an empty file cannot be mapped
                    buf = f.read()
            else:
                buf = f.read()
        entry = decode(buf)
        _mark_used(path)
        return entry
    except FileNotFoundError:
        return None
    except Exception:  # damaged or foreign: drop it and rebuild
        discard(kind, key)
        return None


def discard(kind: str, key: str) -> None:
    path = entry_path(kind, key)
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def save(kind: str, key: str, arrays: dict[str, np.ndarray], meta: dict[str, Any] | None = None) -> None:
    """Write atomically; failures (read-only disk, full disk) only cost the cache."""
    path = entry_path(kind, key)
    if path is None:
        return
    write_atomic(path, encode(arrays, meta or {}))
    trim(keep=path)


def _mark_used(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:  # (a read-only cache is still read)
        pass


def budget() -> int:
    """The cache's size limit in bytes ($MINISTRUCT_CACHE_MAX_MB, else MAX_BYTES)."""
    try:
        return int(float(os.environ["MINISTRUCT_CACHE_MAX_MB"]) * 1024 * 1024)
    except (KeyError, ValueError):
        return MAX_BYTES


def trim(keep: Path | None = None) -> None:
    """Delete the least recently used entries until they take at most `budget()` bytes
    (never `keep`, the entry just written)."""
    d = cache_dir()
    if d is None:
        return
    found = []
    for path in d.glob(f"*/*{SUFFIX}"):
        try:
            st = path.stat()
        except OSError:  # (another process deleted it)
            continue
        found.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in found)
    for _, size, path in sorted(found, key=lambda f: f[0]):
        if total <= budget():
            break
        if path != keep:
            try:
                path.unlink()
                total -= size
            except OSError:
                pass

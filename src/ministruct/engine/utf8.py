"""Code point ranges to UTF-8 byte-range sequences (the classic utf8-ranges split).

A range of code points becomes a few sequences of byte ranges; a string of bytes
matches one sequence exactly when it is the UTF-8 encoding of a code point in the
range. Surrogates (U+D800-U+DFFF) have no UTF-8 encoding and are dropped. The way back:
`interval_code_points` (a sequence of byte intervals to its code point ranges) and
`merge_products` (the same byte strings in fewer sequences).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import product

from ministruct.grammar.ir import normalize_ranges

_LENGTH_SPANS = ((0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))

ByteSeq = tuple[tuple[int, int], ...]


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def _split(lo: int, hi: int, out: list[ByteSeq]) -> None:
    n = len(_encode(lo))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    a, b = _encode(lo), _encode(hi)
    out.append(tuple(zip(a, b)))


@lru_cache(maxsize=4096)
def utf8_sequences(ranges: tuple[tuple[int, int], ...]) -> tuple[ByteSeq, ...]:
    """Byte-range sequences matching exactly the UTF-8 encodings of `ranges`."""
    out: list[ByteSeq] = []
    for lo, hi in ranges:
        pieces = [(lo, hi)]
        if lo <= 0xDFFF and hi >= 0xD800:  # cut out the surrogates
            pieces = [(lo, 0xD7FF), (0xE000, hi)]
        for a, b in pieces:
            for s, e in _LENGTH_SPANS:
                x, y = max(a, s), min(b, e)
                if x <= y:
                    _split(x, y, out)
    return tuple(out)


def merge_products(seqs: list[tuple[tuple[int, int], ...]]) -> list[tuple[tuple[int, int], ...]]:
    """The same byte strings as the products of these interval sequences (all of one
    length), in fewer products: sequences that differ at one position only are one, with
    that position's intervals joined (from the last position to the first, so a class
    path's characters split over many continuation-byte classes come back whole)."""
    for pos in range(len(seqs[0]) - 1, -1, -1):
        rest: dict[tuple, list[tuple[int, int]]] = {}
        for ivs in seqs:
            rest.setdefault(ivs[:pos] + ivs[pos + 1 :], []).append(ivs[pos])
        seqs = [key[:pos] + (iv,) + key[pos:] for key, ivs in rest.items() for iv in normalize_ranges(ivs)]
    return seqs


def interval_code_points(ivs: tuple[tuple[int, int], ...], most: int) -> list[tuple[int, int]] | None:
    """Code point ranges of the UTF-8 sequences whose k-th byte is in ivs[k] (None: more
    than `most` of them)."""
    k = len(ivs)
    if any(lo > hi for lo, hi in ivs):
        return []
    p = k - 1
    while p > 0 and ivs[p] == (0x80, 0xBF):
        p -= 1
    count = 1
    for lo, hi in ivs[:p]:
        count *= hi - lo + 1
    if count > most:
        return None
    out = []
    tail_lo, tail_hi = bytes([0x80] * (k - p - 1)), bytes([0xBF] * (k - p - 1))
    for prefix in product(*(range(lo, hi + 1) for lo, hi in ivs[:p])):
        a = bytes(prefix) + bytes([ivs[p][0]]) + tail_lo
        b = bytes(prefix) + bytes([ivs[p][1]]) + tail_hi
        out.append((ord(a.decode("utf-8")), ord(b.decode("utf-8"))))
    return out


def path_code_points(
    byte_seqs: list[ByteSeq], byte_class: list[int], paths: tuple, most: int
) -> tuple[tuple[int, int], ...] | None:
    """The code points spelled by class paths `(i, classes)` (the i-th sequence of `byte_seqs`
    with each byte restricted to the bytes of a class; `byte_class` sorted, classes being runs
    of consecutive bytes), as merged ranges; None when more than `most` ranges."""
    bc = byte_class  # (sorted: a class's bytes are bisect_left..bisect_right - 1)
    by_shape: dict[int, list[ByteSeq]] = {}
    for i, path in paths:
        ivs = tuple(
            (max(lo, bisect_left(bc, c)), min(hi, bisect_right(bc, c) - 1)) for (lo, hi), c in zip(byte_seqs[i], path)
        )
        if all(lo <= hi for lo, hi in ivs):
            by_shape.setdefault(i, []).append(ivs)
    out: list[tuple[int, int]] = []
    room = most
    for seqs in by_shape.values():
        for ivs in merge_products(seqs):
            got = interval_code_points(ivs, room)
            if got is None:
                return None
            room -= len(got)
            out.extend(got)
    return normalize_ranges(out)

"""Code point ranges to UTF-8 byte-range sequences (the classic utf8-ranges split).

A range of code points becomes a few sequences of byte ranges; a string of bytes
matches one sequence exactly when it is the UTF-8 encoding of a code point in the
range. Surrogates (U+D800-U+DFFF) have no UTF-8 encoding and are dropped.
"""

from __future__ import annotations

from functools import lru_cache

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

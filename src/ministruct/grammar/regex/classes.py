"""The code point sets of regex character classes, exactly as Python's `re` has them on
str: `\\d \\D \\w \\W \\s \\S` (plain and ASCII-only), and what a class matches under
IGNORECASE. They are found by asking `re` about every code point; those scans (100-500 ms in
a fresh process) ship precomputed for the Unicode database of the Python that made them
(unicode_classes.json, made by scripts/regen_unicode_classes.py) and are made here for any
other database."""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from ministruct.grammar.ir import MAX_CODE_POINT, normalize_ranges

SHIPPED_CLASSES = Path(__file__).with_name("unicode_classes.json")
CATEGORY_LETTERS = "dDwWsS"


@lru_cache(maxsize=1)
def _all_code_points() -> str:
    return "".join(map(chr, range(MAX_CODE_POINT + 1)))


@lru_cache(maxsize=1)
def _shipped() -> dict[str, tuple[tuple[int, int], ...]]:
    """The sets below as scripts/regen_unicode_classes.py wrote them, when they were made
    with this Python's Unicode database (else none: they are scanned here)."""
    try:
        data = json.loads(SHIPPED_CLASSES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("unidata_version") != unicodedata.unidata_version:
        return {}
    return {k: tuple((int(a), int(b)) for a, b in v) for k, v in data.get("ranges", {}).items()}


def scan_cased() -> tuple[tuple[int, int], ...]:
    """Every code point `re` may treat differently under IGNORECASE, as ranges, found by
    asking `re`'s own database of each code point."""
    import _sre

    return normalize_ranges([(c, c) for c in range(MAX_CODE_POINT + 1) if _sre.unicode_iscased(c)])


@lru_cache(maxsize=1)
def _cased() -> tuple[str, tuple[tuple[int, int], ...]]:
    """Every code point `re` may treat differently under IGNORECASE (as text and ranges)."""
    ranges = _shipped().get("cased") or scan_cased()
    return "".join(chr(c) for lo, hi in ranges for c in range(lo, hi + 1)), ranges


@lru_cache(maxsize=64)
def _scan_ranges(pattern: str) -> tuple[tuple[int, int], ...]:
    """The code points a one-character `pattern` matches, found by scanning all of them with `re`."""
    rx = re.compile(f"(?:{pattern})+")
    return tuple((m.start(), m.end() - 1) for m in rx.finditer(_all_code_points()))


def category_key(letter: str, ascii_only: bool) -> str:
    """The name of a category's set in unicode_classes.json (`d`, `aw`, ...)."""
    return ("a" if ascii_only else "") + letter


def scan_category(letter: str, ascii_only: bool = False) -> tuple[tuple[int, int], ...]:
    """`category_ranges`, always by scanning every code point with `re`."""
    return _scan_ranges(("(?a:\\" if ascii_only else "(?:\\") + letter + ")")


def category_ranges(letter: str, ascii_only: bool = False) -> tuple[tuple[int, int], ...]:
    """Code points of `\\d \\D \\w \\W \\s \\S` exactly as Python's `re` has them on str."""
    hit = _shipped().get(category_key(letter, ascii_only))
    return hit if hit is not None else scan_category(letter, ascii_only)


def _subtract(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi and cur <= hi:
            if b[k][0] > cur:
                out.append((cur, b[k][0] - 1))
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


@lru_cache(maxsize=4096)
def ignorecase_ranges(
    re_text: str, plain: tuple[tuple[int, int], ...], ascii_only: bool
) -> tuple[tuple[int, int], ...]:
    """Positive ranges of a one-character pattern under IGNORECASE.

    Uncased code points match exactly as without the flag (re lowers them to
    themselves); the cased ones are asked of `re` directly.
    """
    cased_text, cased_ranges = _cased()
    rx = re.compile(("(?a)" if ascii_only else "") + "(?i:" + re_text + ")")
    hits = [(ord(c), ord(c)) for c in cased_text if rx.fullmatch(c)]
    return normalize_ranges(list(_subtract(plain, cased_ranges)) + hits)


def re_escape_cp(cp: int) -> str:
    """A code point as `re` reads it inside a class or alone."""
    if cp < 0x80 and not chr(cp).isalnum():
        return f"\\x{cp:02x}"
    return f"\\U{cp:08x}" if cp > 0xFFFF else f"\\u{cp:04x}" if cp > 0x7F else chr(cp)


__all__ = [
    "CATEGORY_LETTERS",
    "SHIPPED_CLASSES",
    "category_key",
    "category_ranges",
    "ignorecase_ranges",
    "re_escape_cp",
    "scan_cased",
    "scan_category",
]

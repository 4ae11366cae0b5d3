"""Could the grammar have produced this text? Whole-text checks with a precise account of
where and why a text is rejected (a CheckResult)."""

from __future__ import annotations

from ministruct.check.result import CheckResult
from ministruct.engine.automaton import Automaton, automaton_for
from ministruct.grammar.ir import Grammar


def _describe_byte(b: int) -> str:
    if 0x20 < b < 0x7F and b not in (0x27, 0x5C):
        return chr(b)
    return {0x20: "space", 0x27: "'", 0x5C: "\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}.get(b, f"\\x{b:02x}")


NON_ASCII_STEPS = 4_096  # automaton steps spent spelling out the non-ASCII characters that may follow
NON_ASCII_SHOWN = 4  # ranges of them shown; more is "a non-ASCII character"


def _describe_char(cp: int) -> str:
    return _describe_byte(cp) if cp < 0x80 else chr(cp)


def _class(ranges: list[tuple[int, int]]) -> str:
    """One character, quoted, or a class of code point ranges: 'x', [0-9a-f], [α-ω]."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        d = _describe_char(ranges[0][0])
        return f'"{d}"' if d == "'" else f"'{d}'"
    parts = [_describe_char(lo) if lo == hi else f"{_describe_char(lo)}-{_describe_char(hi)}" for lo, hi in ranges]
    return "[" + "".join(parts) + "]"


def _non_ascii(a: Automaton, config, ranges: list[tuple[int, int]]) -> list[tuple[int, int]] | str:
    """The non-ASCII characters that may come next, as code point ranges; "all" when every
    lead byte may (any non-ASCII character, as far as a message goes), "many" when they
    are too many to spell out."""
    leads = [(max(lo, 0xC2), min(hi, 0xF4)) for lo, hi in ranges if hi >= 0xC2 and lo <= 0xF4]
    if sum(hi - lo + 1 for lo, hi in leads) >= 0xF4 - 0xC2 + 1:
        return "all"
    found: set[int] = set()
    budget = [NON_ASCII_STEPS]

    def walk(cfg, cp: int, left: int) -> bool:
        for lo, hi in a.allowed_bytes(cfg):
            for b in range(max(lo, 0x80), min(hi, 0xBF) + 1):
                budget[0] -= 1
                if budget[0] < 0:
                    return False
                nxt = a.step(cfg, b)
                if not nxt:
                    continue
                if left == 1:
                    found.add((cp << 6) | (b & 0x3F))
                elif not walk(nxt, (cp << 6) | (b & 0x3F), left - 1):
                    return False
        return True

    for lo, hi in leads:
        for b in range(lo, hi + 1):
            nxt = a.step(config, b)
            n = 1 if b < 0xE0 else 2 if b < 0xF0 else 3
            if nxt and not walk(nxt, b & (0x3F >> n), n):
                return "many"
    out: list[tuple[int, int]] = []
    for cp in sorted(found):
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out if len(out) <= NON_ASCII_SHOWN else "many"


def describe_expected(a: Automaton, config) -> tuple[str, ...]:
    """Human words for what may come next in a configuration: characters, not bytes."""
    out: list[str] = []
    ranges = a.allowed_bytes(config)
    ascii = [(lo, min(hi, 0x7F)) for lo, hi in ranges if lo < 0x80]
    has_non_ascii = any(hi >= 0xC2 for _, hi in ranges)
    n_ascii = sum(hi - lo + 1 for lo, hi in ascii)
    other = _non_ascii(a, config, ranges) if has_non_ascii else []
    if other == "all" and n_ascii > 64:  # most characters: say which are not
        missing, at = [], 0
        for lo, hi in ascii + [(0x80, 0x80)]:
            if lo > at:
                missing.append((at, lo - 1))
            at = hi + 1
        out.append(f"any character but {_class(missing)}" if missing else "any character")
    else:
        spelled = other if isinstance(other, list) else []
        if ascii or spelled:
            out.append(_class(ascii + spelled))
        if isinstance(other, str):
            out.append("a non-ASCII character")
    if any(a.token_edges[st[-1]] for st in config if st):
        out.append("a special token")
    if a.is_accepting(config):
        out.append("end of text")
    return tuple(out)


def check_text(grammar: Grammar, text: str | bytes, *, prefix: bool = False) -> CheckResult:
    """Does the text match (or, with prefix=True, can it still be completed)?"""
    a = automaton_for(grammar)
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    config = a.initial
    char_start = 0
    for i, b in enumerate(data):
        if b & 0xC0 != 0x80:
            char_start = i
        nxt = a.step(config, b)
        if not nxt:
            # report at the start of the character that cannot continue
            if i != char_start:
                config = a.step_bytes(a.initial, data[:char_start])
            return _reject(a, config, data, char_start)
        config = nxt
    if prefix or a.is_accepting(config):
        return CheckResult(True)
    return _reject(a, config, data, len(data))


def _reject(a: Automaton, config, data: bytes, offset: int) -> CheckResult:
    before = data[:offset].decode("utf-8", "replace")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    found = None
    if offset < len(data):
        found = data[offset : offset + 4].decode("utf-8", "replace")[:1]
    return CheckResult(False, offset, line, column, describe_expected(a, config), found)

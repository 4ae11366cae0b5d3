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


def describe_expected(a: Automaton, config) -> tuple[str, ...]:
    """Human words for what may come next in a configuration."""
    out: list[str] = []
    ranges = a.allowed_bytes(config)
    ascii_parts = []
    has_non_ascii = any(hi >= 0x80 for _, hi in ranges)
    for lo, hi in ranges:
        if lo >= 0x80:
            continue
        hi = min(hi, 0x7F)
        ascii_parts.append(_describe_byte(lo) if lo == hi else f"{_describe_byte(lo)}-{_describe_byte(hi)}")
    if len(ascii_parts) == 1 and "-" not in ascii_parts[0]:
        out.append(repr(ascii_parts[0]))
    elif ascii_parts:
        out.append("[" + "".join(ascii_parts) + "]")
    if has_non_ascii:
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

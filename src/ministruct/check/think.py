"""Checking an output that thinks first: the text after the first CLOSE against the
constraint (and the thinking against its own grammar, when it has one)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ministruct.check.grammar import check_text
from ministruct.check.result import CheckResult
from ministruct.grammar.ir import Grammar


def after_close(
    check: Callable[[str], CheckResult],
    *,
    close: str,
    open: str | None = None,
    free: Grammar | None = None,
    prefix: bool = False,
) -> Callable[[str], CheckResult]:
    """A check of whole outputs `thinking CLOSE answer` built from `check`, the check of the
    answer alone. Positions in a rejection are of the whole text. Without CLOSE the text
    is rejected at its end (with `prefix`: accepted, the thinking may still go on)."""

    def run(text: str) -> CheckResult:
        i = text.find(close)
        if i < 0:
            if prefix:
                return CheckResult(True)
            return _at(text, len(text), f"the thinking never ends: no {close!r} in the text")
        if free is not None:
            thinking = text[:i]
            if open is not None and thinking.startswith(open):
                thinking = thinking[len(open) :]
            res = check_text(free, thinking)
            if not res.accepted:
                return replace(res, reason=f"the thinking does not match its grammar: {res.message()}")
        start = i + len(close)
        res = check(text[start:])
        if res.accepted or res.offset is None:
            return res
        return _moved(res, text, start)

    return run


def _at(text: str, char_index: int, reason: str) -> CheckResult:
    head = text[:char_index]
    line = head.count("\n") + 1
    column = char_index - (head.rfind("\n") + 1) + 1
    return CheckResult(False, offset=len(head.encode("utf-8")), line=line, column=column, reason=reason)


def _moved(res: CheckResult, text: str, start: int) -> CheckResult:
    """`res` (of text[start:]) with its position in the whole text."""
    head = text[:start]
    offset = len(head.encode("utf-8")) + (res.offset or 0)
    before = text.encode("utf-8")[:offset].decode("utf-8", "replace")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return replace(res, offset=offset, line=line, column=column)


__all__ = ["after_close"]

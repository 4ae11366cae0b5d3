"""CheckResult: the one verdict type of every check, accepted or where and why not."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CheckResult:
    """The verdict on one text.

    A rejection says where: a byte `offset` with its 1-based `line` and `column` (in
    characters), for a grammar check or a JSON syntax error; or the JSON `pointer` of the
    offending value and the `keyword` that failed, for a schema violation. `expected` and
    `found` (the offending character, None at the end of the text) come from a grammar
    check; `reason` from the JSON reader or the validator."""

    accepted: bool
    offset: int | None = None
    line: int | None = None
    column: int | None = None
    expected: tuple[str, ...] = ()
    found: str | None = None
    pointer: str | None = None
    keyword: str | None = None
    reason: str | None = None

    def message(self) -> str | None:
        """One line saying where the text was rejected and why (None when accepted)."""
        if self.accepted:
            return None
        if self.pointer is not None:
            keyword = f" (keyword {self.keyword})" if self.keyword is not None else ""
            return f"{self.pointer}: {self.reason}{keyword}"
        where = f"line {self.line}, column {self.column} (byte {self.offset})"
        if self.reason is not None:
            return f"{where}: {self.reason}"
        got = "end of text" if self.found is None else f"unexpected {self.found!r}"
        exp = f"; expected {' or '.join(self.expected)}" if self.expected else ""
        return f"{where}: {got}{exp}"

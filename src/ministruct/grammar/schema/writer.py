"""The grammar a schema compiles to, as it is written: rule names and bodies, position
marks, warnings and refusals, shared helper rules, and the punctuation of the chosen
whitespace layout (SchemaOptions.whitespace). The compiler (compiler.py) is one of these."""

from __future__ import annotations

import re
from typing import Callable, Optional

from ministruct.errors import SchemaError
from ministruct.grammar.ir import (
    EMPTY,
    NOTHING,
    CharClass,
    Expr,
    Literal,
    Mark,
    Repeat,
    RuleRef,
    alt_some,
    seq,
    seq_all,
)
from ministruct.grammar.limits import MAX_REPEAT
from ministruct.grammar.schema.multiples import exact_validator

WS_BOUND = 20
MAX_PRETTY_DEPTH = 24


def dead(e: Optional[Expr]) -> bool:
    """Is `e` no language at all (None or NOTHING)?"""
    return e is None or e == NOTHING


def alt_known(*opts: Optional[Expr]) -> Expr:
    """The union of the options that are there (None: none)."""
    return alt_some(*(o for o in opts if o is not None))


def seq_known(*items: Optional[Expr]) -> Expr:
    """The sequence of the items, NOTHING when one is missing (None)."""
    return NOTHING if any(i is None for i in items) else seq_all(*items)  # type: ignore[arg-type]


class GrammarWriter:
    """Rules, marks, warnings and punctuation; the attributes are set by the compiler."""

    ws: str
    lenient: bool
    source: str
    marking: bool
    marks: dict[str, Mark]
    rules: dict[str, Expr]
    warnings: list[str]
    not_enforced: list[str]  # pointers of the keywords left out (lenient)

    # ------------------------------------------------------------ plumbing

    def ignore(self, where: str, message: str) -> None:
        """Leave the keyword at pointer `where` out (lenient): a warning, and its pointer."""
        if message not in self.warnings:
            self.warnings.append(message)
        if where not in self.not_enforced:
            self.not_enforced.append(where)

    def error(self, message: str, pointer: str, keyword: Optional[str] = None) -> SchemaError:
        return SchemaError(message, pointer=pointer or "/", keyword=keyword, source=self.source)

    def unsupported(self, keyword: str, ptr: str, why: str = "is not enforced") -> None:
        where = f"{ptr}/{keyword}" if ptr != "/" else f"/{keyword}"
        if not self.lenient:
            raise self.error(f"keyword '{keyword}' {why} (lenient=True ignores it)", where, keyword)
        self.ignore(where, f"{self.source}: at {where}: keyword '{keyword}' {why}; ignored (lenient)")

    def restricted(self, keyword: str, ptr: str, why: str) -> None:
        """Say (one warning) that `keyword` at `ptr` is enforced on a smaller language than
        the schema's: every output is valid, some valid instances are never generated."""
        where = f"{ptr}/{keyword}" if ptr != "/" else f"/{keyword}"
        msg = f"{self.source}: at {where}: keyword '{keyword}' {why} (a restriction: every output is valid)"
        if msg not in self.warnings:
            self.warnings.append(msg)

    def bounded_count(self, keyword: str, x: int, ptr: str) -> int | None:
        """x, or None when it is beyond the repetition limit (refused; ignored with lenient).
        A maximum past the limit is the limit (MAX_REPEAT characters or items: a restriction
        no output of a model's context comes near)."""
        if x <= MAX_REPEAT:
            return x
        if keyword.startswith("max"):
            self.restricted(keyword, ptr, f"({x:,}) is read as the compile limit of {MAX_REPEAT:,}")
            return MAX_REPEAT
        self.unsupported(keyword, ptr, f"({x:,}) is beyond the compile limit of {MAX_REPEAT:,}")
        return None

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]+", "-", hint).strip("-").lower() or "r"
        name, i = base, self._next_suffix.get(base, 2)
        while name in self.rules:
            name, i = f"{base}-{i}", i + 1
        self._next_suffix[base] = i
        self.rules[name] = NOTHING
        return name

    def define(self, name: str, body: Expr) -> None:
        self.rules[name] = body

    def rule(self, hint: str, body: Expr) -> RuleRef:
        name = self.fresh(hint)
        self.rules[name] = body
        return RuleRef(name)

    def marked(self, hint: str, body: Expr, mark: Mark) -> Expr:
        if not self.marking or dead(body):
            return body
        ref = self.rule(hint, body)
        self.marks[ref.name] = mark
        return ref

    def mark(self, name: str, mark: Mark) -> None:
        if self.marking:
            self.marks[name] = mark

    @property
    def validator(self):
        if self._validator is None:
            from jsonschema import Draft202012Validator

            self._validator = exact_validator(Draft202012Validator)(
                self.resolver.root, format_checker=Draft202012Validator.FORMAT_CHECKER
            )
        return self._validator

    # ------------------------------------------------------------ whitespace

    def shared(self, name: str, body: Expr) -> RuleRef:
        """A named helper rule defined once (whitespace, strings, numbers, formats)."""
        if name not in self._shared:
            self._shared[name] = self.fresh(name)
            self.define(self._shared[name], body)
            if self.marking and name in ("ws", "space"):
                self.marks[self._shared[name]] = Mark(None, "whitespace")
        return RuleRef(self._shared[name])

    def shared_made(self, name: str, make: Callable[[], Expr]) -> RuleRef:
        """shared(name, make()), with the body made only the first time (an expensive one)."""
        if name in self._shared:
            return RuleRef(self._shared[name])
        return self.shared(name, make())

    def _ws(self) -> Expr:
        if self.ws != "flexible":
            return EMPTY
        return self.shared("ws", Repeat(CharClass(((9, 10), (13, 13), (32, 32))), 0, WS_BOUND))

    def _space(self, after: str) -> Expr:
        """`after` and the spaced layout's one space (a rule marked whitespace when marking)."""
        if not self.marking:
            return Literal(after + " ")
        return seq(Literal(after), self.shared("space", Literal(" ")))

    def colon(self) -> Expr:
        if self.ws == "spaced":
            return self._space(":")
        return {"compact": Literal(":"), "pretty": Literal(": ")}.get(self.ws) or seq(
            self._ws(), Literal(":"), self._ws()
        )

    def comma(self, depth: int) -> Expr:
        if self.ws == "pretty":
            return Literal(",\n" + "  " * (depth + 1))
        if self.ws == "spaced":
            return self._space(",")
        return Literal(",") if self.ws == "compact" else seq(self._ws(), Literal(","), self._ws())

    def open_(self, depth: int) -> Expr:
        return Literal("\n" + "  " * (depth + 1)) if self.ws == "pretty" else self._ws()

    def close(self, depth: int) -> Expr:
        return Literal("\n" + "  " * depth) if self.ws == "pretty" else self._ws()

    def empty_inside(self) -> Expr:
        return self._ws() if self.ws == "flexible" else EMPTY

    def _depth_ok(self, depth: int) -> bool:
        if self.ws != "pretty" or depth < MAX_PRETTY_DEPTH:
            return True
        msg = f"{self.source}: pretty whitespace: nesting deeper than {MAX_PRETTY_DEPTH} levels is not generated"
        if msg not in self.warnings:
            self.warnings.append(msg)
        return False

    def key_depth(self, depth: int) -> int:
        return depth if self.ws == "pretty" else 0

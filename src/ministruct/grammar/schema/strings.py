"""JSON strings of a schema: length bounds, `format`, `pattern` (a search, as the
validator reads it), and strings a native `not` excludes; where they meet, one DFA x length
product (schema_patterns) within the schema's budget of product rules."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional

from ministruct.errors import GrammarSyntaxError
from ministruct.grammar.ir import NOTHING, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, alt, seq
from ministruct.grammar.schema.budget import below, within_length
from ministruct.grammar.schema.formats import (
    ANY_STRING,
    ASCII_FORMATS,
    COUNTED_CHAR,
    KNOWN_UNSUPPORTED,
    SUPPORTED_FORMATS,
    encode_chars,
    format_expr,
    small_format_expr,
)
from ministruct.grammar.schema.lengths import length_bounds, restrict_length, search_core, search_with_length
from ministruct.grammar.schema.lookaheads import top_level_bar, trailing_found
from ministruct.grammar.schema.merge import PATTERNS
from ministruct.grammar.schema.patterns import (
    MAX_FORMAT_PRODUCT_STATES,
    MAX_PRODUCT_RULES,
    PatternTooLarge,
    pattern_with_length,
    searched_regex,
)
from ministruct.grammar.schema.values import excluded_by_not
from ministruct.grammar.schema.writer import GrammarWriter, dead, seq_known

# rules made by pattern/format/length products in one schema; past it, a product that
# length bounds need is replaced by a part of the language that fits (schema_budget)
MAX_SCHEMA_PRODUCT_RULES = 8_000
SHORTER_MAXIMA = (256, 128, 64)  # a format, a pattern and a maxLength too large together: these maxima


class Strings(GrammarWriter):
    """string() and the pattern/format/length machinery behind it, for the compiler."""

    _product_rules: int
    _dfa_work: list[int]
    _avoiding_made: dict[tuple, Expr]

    def string(self, node: dict, ptr: str) -> Expr:
        lo, hi = 0, None
        for k in ("minLength", "maxLength"):
            if k in node:
                x = node[k]
                if isinstance(x, float) and x.is_integer():
                    x = int(x)
                if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                    raise self.error(f"{k} must be a non-negative integer", f"{ptr}/{k}", k)
                if k == "minLength":
                    lo = self.bounded_count(k, x, ptr) or 0
                else:
                    hi = self.bounded_count(k, x, ptr)
        if hi is not None and hi < lo:
            return NOTHING
        decoded: Optional[Expr] = None
        fmt = node.get("format")
        if fmt is not None and not isinstance(fmt, str):
            raise self.error("format must be a string", f"{ptr}/format", "format")
        if fmt is not None:
            if fmt in SUPPORTED_FORMATS:
                decoded = format_expr(fmt)
            elif fmt in KNOWN_UNSUPPORTED:
                self.unsupported("format", ptr, f"'{fmt}' is not enforced")
            else:
                msg = f"{self.source}: at {ptr}/format: unknown format {fmt!r} is an annotation only"
                if msg not in self.warnings:
                    self.warnings.append(msg)
        ex = excluded_by_not(node)
        avoided = [self.searched_language(p, f"{ptr}/not/pattern") for p in ex.patterns]
        names = [v for v in ex.values if isinstance(v, str)]
        if names:
            avoided.append(alt(*(Literal(n) for n in names)))
        if avoided or node.get(PATTERNS):
            if decoded is not None:
                return seq_known(
                    Literal('"'), self.format_within(fmt, decoded, node, avoided, ptr, lo, hi), Literal('"')
                )
            patterns = [node.get("pattern", ""), *node.get(PATTERNS, [])]
            return seq_known(Literal('"'), self.pattern_avoiding(patterns, avoided, ptr, lo, hi), Literal('"'))
        if "pattern" in node:
            if decoded is not None:
                return seq_known(Literal('"'), self.format_within(fmt, decoded, node, None, ptr, lo, hi), Literal('"'))
            if lo == 0 and hi is None and isinstance(node["pattern"], str):
                return self.pattern_rule(node["pattern"], f"{ptr}/pattern")
            return seq_known(Literal('"'), self.pattern(node["pattern"], f"{ptr}/pattern", lo, hi), Literal('"'))
        if decoded is None:
            if lo == 0 and hi is None:
                return self.shared("string", ANY_STRING)
            # (one rule per bound: every string of the schema with these bounds shares its
            # parser states, and so its masks)
            counted = seq(Literal('"'), Repeat(self.shared("char", COUNTED_CHAR), lo, hi), Literal('"'))
            return self.shared(f"string-{lo}-{hi if hi is not None else 'inf'}", counted)
        try:
            r = restrict_length(decoded, lo, hi)
        except LookupError:
            return NOTHING
        if r is None:
            return seq(Literal('"'), self.format_within(fmt, decoded, node, None, ptr, lo, hi), Literal('"'))
        name = f"format-{fmt}" if r is decoded else f"format-{fmt}-{lo}-{hi if hi is not None else 'inf'}"
        return self.shared_made(name, lambda: seq(Literal('"'), encode_chars(r), Literal('"')))

    def pattern_rule(self, pattern: str, ptr: str) -> Expr:
        """A JSON string matching `pattern`, one rule per pattern: its occurrences share
        their parser states, and so their masks."""
        key = f"pattern {pattern}"
        if key not in self._shared:
            body = seq_known(Literal('"'), self.pattern(pattern, ptr, 0, None), Literal('"'))
            if dead(body):
                return body
            self._shared[key] = self.rule("pattern", body).name
        return RuleRef(self._shared[key])

    def format_within(
        self, fmt: str, decoded: Expr, node: dict, avoided: Optional[list[Expr]], ptr: str, lo: int, hi: Optional[int]
    ) -> Expr:
        """JSON string content in format `fmt` (its language `decoded`) that also matches the
        node's `pattern`, avoids `avoided` and has `lo` to `hi` characters: one DFA x length
        product (schema_patterns), or the format alone when that is too large."""
        langs = [decoded]
        for p in [node["pattern"]] if "pattern" in node else []:
            langs.append(self.searched_language(p, f"{ptr}/pattern"))
        for p in node.get(PATTERNS, []):
            langs.append(self.searched_language(p, f"{ptr}/allOf"))
        need = frozenset(range(len(langs)))
        langs += avoided or []
        if fmt in ASCII_FORMATS:  # the other languages' characters past ASCII are never in the product
            langs = [decoded, *(below(e, 0x7F) for e in langs[1:])]
        a, b = length_bounds(decoded)
        if a >= lo and (hi is None or (b is not None and b <= hi)):
            lo, hi = 0, None  # every string of the format has an allowed length
        try:
            r = self.product(
                langs,
                lo,
                hi,
                accept=lambda label: label == need,
                max_states=MAX_FORMAT_PRODUCT_STATES,
                fits=not avoided,
            )
        except PatternTooLarge as e:
            smaller = self.format_by_budget(fmt, langs[1:], need, lo, hi)
            if smaller is not None:
                self.restricted("format", ptr, f"'{fmt}' with patterns or length bounds is a part of it ({e})")
                return smaller
            keyword = (
                "pattern"
                if "pattern" in node
                else "not"
                if avoided
                else ("maxLength" if hi is not None else "minLength")
            )
            self.unsupported(keyword, ptr, f"together with format '{fmt}' is too large to enforce ({e})")
            return encode_chars(decoded)
        return NOTHING if r is None else r

    def format_by_budget(
        self, fmt: str, others: list[Expr], need: frozenset, lo: int, hi: Optional[int]
    ) -> Optional[Expr]:
        """Where the exact product of format `fmt` with patterns (`others`) or length bounds is
        too large: a part of the format that fits (schema/budget.py), or with patterns the
        product with the format's smaller sub-language (formats.small_format_expr), its
        maximum length lowered until the product fits; None when neither does."""
        if not others:
            r = within_length(format_expr(fmt), lo, hi)
            return None if r is None else encode_chars(r)
        for top in dict.fromkeys((hi, *SHORTER_MAXIMA)):
            if (top is not None and top < lo) or (hi is not None and top is not None and top > hi):
                continue
            try:
                r = self.product(
                    [small_format_expr(fmt), *others],
                    lo,
                    top,
                    accept=lambda label: label == need,
                    max_states=2 * MAX_FORMAT_PRODUCT_STATES,
                    fits=False,
                )
            except PatternTooLarge:
                continue
            return NOTHING if r is None else r
        return None

    def product(
        self,
        langs: list[Expr],
        lo: int,
        hi: Optional[int],
        accept: Optional[Callable[[frozenset[int]], bool]] = None,
        max_states: Optional[int] = None,
        fits: bool = True,
    ) -> Optional[Expr]:
        """schema_patterns.pattern_with_length; a product with a fallback (`fits`: a part of
        the language that fits, schema_budget) within what is left of the schema's budget
        of product rules (MAX_SCHEMA_PRODUCT_RULES): past it, PatternTooLarge."""
        made = 0

        def fresh(hint: str) -> str:
            nonlocal made
            made += 1
            return self.fresh(hint)

        left = MAX_SCHEMA_PRODUCT_RULES - self._product_rules if fits else MAX_PRODUCT_RULES
        try:
            return pattern_with_length(
                langs,
                lo,
                hi,
                fresh,
                self.define,
                accept=accept,
                max_states=max_states,
                max_rules=left,
                work=self._dfa_work,
            )
        finally:
            self._product_rules += made if fits else 0

    def regex_language(self, pattern: Any, text: str, ptr: str) -> Expr:
        """The IR of `text`, a regex made from the schema's `pattern` at `ptr`."""
        from ministruct.grammar.regex.parse import parse_regex

        if not isinstance(pattern, str):
            raise self.error("pattern must be a string", ptr, "pattern")
        try:
            g = _parse_regex_anywhere(text, f"{self.source}#{ptr}")
        except GrammarSyntaxError as e:
            reason = e.reason
            if text != pattern:  # `text` wraps the pattern: say where in the pattern itself
                try:
                    parse_regex(pattern)
                except GrammarSyntaxError as own:
                    reason = own.reason
            raise self.error(f"pattern {json.dumps(pattern)} cannot be enforced: {reason}", ptr, "pattern") from None
        if len(g.rules) != 1:
            raise self.error(f"pattern {pattern!r}: unexpected multi-rule regex grammar", ptr, "pattern")
        return g.rules[g.root]

    def searched_language(self, pattern: Any, ptr: str) -> Expr:
        """The strings the schema's `pattern` at `ptr` is found in (re.search), as IR."""
        if not isinstance(pattern, str):
            raise self.error("pattern must be a string", ptr, "pattern")
        return self.regex_language(pattern, searched_regex(trailing_found(pattern)), ptr)

    def pattern(self, pattern: Any, ptr: str, lo: int, hi: Optional[int]) -> Expr:
        if lo == 0 and hi is None:
            return encode_chars(self.searched_language(pattern, ptr))
        if not isinstance(pattern, str):
            raise self.error("pattern must be a string", ptr, "pattern")
        pattern = trailing_found(pattern)

        def parse(text: str) -> Expr:
            return self.regex_language(pattern, text, ptr)

        left = pattern.startswith("^")
        right = pattern.endswith("$") and (len(pattern) - len(pattern[:-1].rstrip("\\")) - 1) % 2 == 0
        core_text = pattern[1 if left else 0 : len(pattern) - 1 if right else len(pattern)]
        if top_level_bar(core_text) or "^" in core_text.replace("[^", "") or "$" in core_text:
            return self.pattern_by_dfa(pattern, ptr, lo, hi)
        core = parse(core_text)
        try:
            if left and right:  # `$` also matches before a final newline
                opts = []
                for extra in ("", "\n"):
                    try:
                        r = restrict_length(core, max(0, lo - len(extra)), None if hi is None else hi - len(extra))
                    except LookupError:
                        continue
                    if r is None:
                        raise ValueError
                    opts.append(seq(r, Literal(extra)))
                return encode_chars(alt(*opts)) if opts else NOTHING
            if right:
                raise ValueError
            r = search_with_length(search_core(core, not left, True), left, False, lo, hi)
            if r is None:
                raise ValueError
            return encode_chars(r)
        except ValueError:
            return self.pattern_by_dfa(pattern, ptr, lo, hi)
        except LookupError:
            return NOTHING

    def pattern_avoiding(self, patterns: list[str], avoided: list[Expr], ptr: str, lo: int, hi: Optional[int]) -> Expr:
        """Strings that match every one of `patterns` ("" matches all) and none of the
        `avoided` languages (full-match), with lo..hi characters."""
        key = (tuple(patterns), tuple(avoided), lo, hi)  # (the same strings elsewhere: one product)
        if key in self._avoiding_made:
            return self._avoiding_made[key]
        langs = [self.searched_language(p, f"{ptr}/pattern") for p in patterns]
        need = frozenset(range(len(langs)))
        try:
            r = self.product([*langs, *avoided], lo, hi, accept=lambda label: label == need, fits=False)
        except PatternTooLarge as e:
            what = "(patterns or strings to avoid)" if avoided else "(several patterns together)"
            self.unsupported("not" if avoided else "pattern", ptr, f"{what} is too large to enforce ({e})")
            if patterns[0]:
                return self.pattern(patterns[0], f"{ptr}/pattern", lo, hi)
            return Repeat(self.shared("char", COUNTED_CHAR), lo, hi)
        self._avoiding_made[key] = got = NOTHING if r is None else r
        return got

    def pattern_by_budget(self, pattern: str, ptr: str, lo: int, hi: Optional[int]) -> Optional[Expr]:
        """Strings the pattern matches as a whole (re.fullmatch: it is then found in them too),
        or, without anchors, such a match followed by anything, with lo..hi characters
        (schema_budget), as JSON string content; None when none was found. (The whole
        match rather than a match anywhere: a part with one way of reading each string,
        which the engine steps cheaply, and what a writer of the pattern expects.)"""
        whole = self.regex_language(pattern, pattern, ptr)
        fitted = within_length(whole, lo, hi)
        if fitted is None and not re.search(r"\$|\\[bBZAz]", pattern):
            fitted = within_length(seq(whole, Repeat(CharClass((), negated=True), 0, None)), lo, hi)
        return None if fitted is None else encode_chars(fitted)

    def pattern_by_dfa(self, pattern: str, ptr: str, lo: int, hi: Optional[int]) -> Expr:
        """`pattern` with length bounds through a DFA x length product (see schema_patterns)."""
        try:
            r = self.product([self.searched_language(pattern, ptr)], lo, hi)
        except PatternTooLarge as e:
            fitted = self.pattern_by_budget(pattern, ptr, lo, hi)
            if fitted is not None:
                where = ptr.rsplit("/", 1)[0]
                self.restricted("pattern", where, f"with minLength/maxLength is a part of its language ({e})")
                return fitted
            self.unsupported(
                "pattern", ptr.rsplit("/", 1)[0], f"combined with minLength/maxLength is too large to enforce ({e})"
            )
            return self.pattern(pattern, ptr, 0, None)
        return NOTHING if r is None else r


def _parse_regex_anywhere(text: str, source: str) -> Grammar:
    """parse_regex, also deep inside a schema's recursion: where the stack left is too
    short for the regex parser, it parses on a fresh one (a thread of its own)."""
    import threading

    from ministruct.grammar.regex.parse import parse_regex

    try:
        return parse_regex(text, source=source)
    except GrammarSyntaxError as e:
        if e.reason != "regex nested too deeply":
            raise
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["grammar"] = parse_regex(text, source=source)
        except GrammarSyntaxError as err:
            box["error"] = err

    old = threading.stack_size(64 * 1024 * 1024)
    try:
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
    finally:
        threading.stack_size(old)
    if "error" in box:
        raise box["error"]
    return box["grammar"]

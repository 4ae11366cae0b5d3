"""The dialect's syntax tree -> Grammar IR: what a Lark grammar means here.

Each terminal (an UPPERCASE definition, a string, a regex, a range), lazy rule, special
token and `%json` value used in a rule is one lexeme. Read greedily (the default, as
llguidance reads it), each lexeme is a rule of its own named in Grammar.lexer, which the
engine ends where the next byte continues no lexeme allowed there; `%ignore`'s terminals
make the skip lexeme, allowed before each lexeme and at the end (engine/automaton.py).
Read as the context-free language over the terminals (`lexer="cfl"`), `%ignore`'s
terminals may fill the gaps between lexemes (not before the first one unless
`%llguidance {"allow_initial_skip": true}`, never after the last; a lexeme matching the
empty string leaves no gap of its own; gaps.py). Terminals are regular languages
(terminals.py). docs/constraints.md "Two readings" compares the two readings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from lark import Token

from ministruct.errors import GrammarError, SchemaError
from ministruct.grammar.analysis import reachable_rules
from ministruct.grammar.ir import (
    EMPTY,
    Alt,
    Expr,
    Grammar,
    Lexer,
    Literal,
    Repeat,
    RuleRef,
    Seq,
    alt,
    alt_some,
    rename_refs,
    seq,
    seq_all,
    walk,
)
from ministruct.grammar.lark.gaps import NOTHING, LeadingGaps
from ministruct.grammar.lark.json_escapes import DEFAULT_ESCAPES, restrict_escapes
from ministruct.grammar.lark.lazy import LAZY_ATTRIBUTES, check_lazy_attributes, shortest_matches, terminal_body
from ministruct.grammar.lark.special import special_token
from ministruct.grammar.lark.syntax import Definition, LarkProblem, Node, parse_items
from ministruct.grammar.lark.terminals import Terminals, decode_string, repeat
from ministruct.grammar.left_recursion import remove_left_recursion
from ministruct.grammar.schema import SchemaOptions, schema_to_grammar

MAX_NESTED_GRAMMARS = 8  # %lark { %lark { ... } } levels
_OPTIONS = {"allow_initial_skip", "no_forcing", "allow_invalid_utf8"}


class Namer:
    """Unique GBNF-safe rule names ([a-zA-Z0-9-]+) for the IR."""

    def __init__(self) -> None:
        self.used: set[str] = {"root"}

    def __call__(self, want: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9-]", "-", want.lstrip("?!")) or "r"
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}-{k}", k + 1
        self.used.add(name)
        return name


class Compiler:
    """One Lark text (and the grammars nested in it) -> IR rules."""

    def __init__(self, text: str, source: str, options: SchemaOptions, lexer: str = "greedy") -> None:
        self.text, self.source, self.options = text, source, options
        self.greedy = lexer == "greedy"
        self.lexemes: dict[str, str | None] = {}  # lexeme rule -> its skip rule (greedy)
        self.lazy: set[str] = set()
        self.top_skip: str | None = None
        self.initial_skip = False
        self.lexeme_class: dict[str, int] = {}  # lexeme rule -> its class (greedy; Lexer.classes)
        self.class_of_skip: dict[Expr | None, int] = {}  # one class per distinct skip, as llguidance
        self.class_skips: list[str | None] = []
        self.class_parents: list[int] = []
        self.rules: dict[str, Expr] = {}
        self.fresh = Namer()
        self.warnings: list[str] = []
        self.nested = 0

    def embed(self, g: Grammar, prefix: str) -> Expr:
        names = {n: self.fresh(f"{prefix}-{n}") for n in g.rules}
        memo: dict[int, Expr] = {}
        for n, body in g.rules.items():
            self.rules[names[n]] = rename_refs(body, names, memo)
        self.warnings.extend(g.warnings)
        return RuleRef(names[g.root])


def _common() -> dict[str, Node]:
    text = Path(__file__).with_name("common.lark").read_text(encoding="utf-8")
    return {d.name: d.body for d in parse_items(text) if d.kind == "token" and d.body is not None}


_COMMON: dict[str, Node] | None = None


class Scope:
    """The definitions of one grammar (the whole text, or one `%lark {}` block)."""

    def __init__(self, c: Compiler, items: list[Definition], top: bool) -> None:
        self.c, self.top = c, top
        self.rule_defs: dict[str, Definition] = {}
        self.token_defs: dict[str, Node] = {}
        self.rule_names: dict[str, str] = {}
        self.token_rules: dict[str, str] = {}
        self.token_exprs: dict[str, Expr] = {}
        self.ignores: list[Node] = []
        self.lazy_rules: dict[str, dict[str, tuple[Token, Token | None]]] = {}
        self.initial_skip = False
        self.ign: Expr = EMPTY
        self.skip_rule: str | None = None  # the skip lexeme (greedy)
        self.cls = 0  # its lexemes' class (greedy), and the class of the grammar around it
        self.parent_cls = -1
        self.lexeme_rules: dict[tuple[Expr, bool], str] = {}
        self.lexeme_nullable: dict[tuple[Expr, bool], bool] = {}
        self.terminals = Terminals(self.token_defs, self.token_exprs, c.rules, c.fresh)
        for d in items:
            self._declare(d)

    # ------------------------------------------------------------ declarations

    def _declare(self, d: Definition) -> None:
        if d.kind in ("rule", "token"):
            if d.name in self.rule_defs or d.name in self.token_defs:
                raise LarkProblem(f"duplicate rule or terminal '{d.name.lstrip('?!')}'", d.tok)
            if d.priority is not None:
                raise LarkProblem(
                    "priorities (`name.N`) are not supported: they rank lexings, and the language here is all of them",
                    d.priority,
                )
            if d.kind == "token":
                if d.attributes:
                    raise LarkProblem("attributes are only supported on rules, not terminals", d.attributes[0][0])
                self.token_defs[d.name] = d.body  # type: ignore[assignment]
            else:
                self._attributes(d)
                self.rule_defs[d.name.lstrip("?!")] = d
        elif d.kind == "ignore":
            self.ignores.append(d.body)  # type: ignore[arg-type]
        elif d.kind == "import":
            self._import(d)
        elif d.kind == "override":
            raise LarkProblem("directive %override is not supported: there are no imported rules to override", d.tok)
        elif d.kind == "declare":
            raise LarkProblem("directive %declare is not supported: every terminal needs a definition", d.tok)
        elif d.kind == "options":
            self._options(d)

    def _attributes(self, d: Definition) -> None:
        seen: set[str] = set()
        lazy: dict[str, tuple[Token, Token | None]] = {}
        for key, value in d.attributes:
            k = str(key)
            if k in seen:
                raise LarkProblem(f"{k} attribute is specified more than once", key)
            seen.add(k)
            if k in ("capture", "capture_name"):
                if value is not None and value.type == "STRING" and not decode_string(value)[0]:
                    raise LarkProblem("capture name must not be empty", value)
                self.c.warnings.append(
                    f"{self.c.source}:{key.line}:{key.column}: `{k}` accepted; captures are not reported "
                    "and do not change the language"
                )
            elif k in LAZY_ATTRIBUTES:
                lazy[k] = (key, value)
            elif k == "max_tokens":
                raise LarkProblem(
                    "attribute `max_tokens` is not supported: the engine has one token budget for the whole "
                    "output (max_tokens), not one per rule",
                    key,
                )
            elif k == "temperature":
                raise LarkProblem("attribute `temperature` is not supported: sampling is set for the whole output", key)
            else:
                raise LarkProblem(f"Unknown attribute: {k}", key)
        if lazy:
            check_lazy_attributes(lazy)
            terminal_body(d.body, next(iter(lazy.values()))[0])  # type: ignore[arg-type]
            self.lazy_rules[d.name.lstrip("?!")] = lazy

    def _drop_rewritten(self, existing: set[str], written: set[str], start: str) -> None:
        """Drop the rules this grammar made that are not used: a rule of the grammar that
        nothing uses as written (warned about by its own name), a rule left recursion's
        rewriting took in, a helper (a lazy lexeme's) nothing refers to. Warnings never
        name a rule the grammar uses, nor one it did not write."""
        for name, ir in self.rule_names.items():
            if ir not in written:
                self.c.warnings.append(f"rule '{name}' is unreachable from 'start'")
        used = reachable_rules(Grammar(self.c.rules, root=start))
        skips = sorted({k for k in self.c.lexemes.values() if k} - used)  # (a nested grammar's: the lexer's)
        if skips:
            used |= reachable_rules(Grammar(self.c.rules, root=start), roots=skips)
        for n in set(self.c.rules) - existing - used:
            del self.c.rules[n]

    def _lazy_body(self, name: str) -> tuple[Expr, bool, bool]:
        """The lexeme of a rule with `lazy`, `suffix` or `stop` (grammar/lark/lazy.py),
        whether it ends at its first match (not for `stop=""`), and whether it may be empty."""
        d, found = self.rule_defs[name], self.lazy_rules[name]
        body = self.terminals.term(d.body, ())  # type: ignore[arg-type]
        key = next(iter(found.values()))[0]
        marker = found.get("suffix") or found.get("stop")
        if marker is not None:
            value = marker[1]
            assert value is not None
            if value.type == "STRING" and str(value) in ('""', "''"):
                return body, False, False  # stop="": the body as it is, ended by end-of-generation
            kind = {"STRING": "str", "REGEXP": "re", "TOKEN": "ref"}[value.type]
            body = seq(body, self.terminals.term(Node(kind, value, data=str(value)), ()))
        nullable = False
        if self.c.greedy:  # (an empty match is the lexeme left out: its first non-empty match ends it)
            nullable = _nullable_expr(body, self.c.rules)
            body = nonempty_of(body, self.c.rules, self.c.fresh)
        return shortest_matches(body, self.c.rules, self.c.fresh, name, key), True, nullable

    def _import(self, d: Definition) -> None:
        global _COMMON
        path, names = d.data
        if [str(p) for p in path] != ["common"]:
            where = ".".join(str(p) for p in path) or "(nothing)"
            raise LarkProblem(f"only %import common.NAME is supported, not {where}", d.tok)
        if _COMMON is None:
            _COMMON = _common()
        for name, alias in names:
            if str(name) not in _COMMON:
                raise LarkProblem(f"unknown common import '{name}'", name)
            if str(alias) in self.token_defs or str(alias) in self.rule_defs:
                raise LarkProblem(f"duplicate rule or terminal '{alias}'", alias)
            self.token_exprs[str(alias)] = self._common_expr(str(name))
            self.token_defs[str(alias)] = Node("ref", name, data=str(name))

    def _common_expr(self, name: str) -> Expr:
        assert _COMMON is not None
        common = Terminals(_COMMON, {}, self.c.rules, self.c.fresh)
        return common.token_expr(name, Node("ref", Token("TOKEN", name), data=name), ())

    def _options(self, d: Definition) -> None:
        opts = d.data
        if not isinstance(opts, dict):
            raise LarkProblem("failed to parse %llguidance declaration: expected a JSON object", d.tok)
        for k, v in opts.items():
            if k not in _OPTIONS:
                raise LarkProblem(f"failed to parse %llguidance declaration: unknown field {k!r}", d.tok)
            if not isinstance(v, bool):
                raise LarkProblem(f"failed to parse %llguidance declaration: {k} must be true or false", d.tok)
        if opts.get("allow_invalid_utf8"):
            raise LarkProblem("option allow_invalid_utf8 is not supported: outputs here are UTF-8 text", d.tok)
        self.initial_skip = bool(opts.get("allow_initial_skip"))
        # no_forcing only changes how llguidance picks forced tokens; our legal sets are exact either way

    # ------------------------------------------------------------ rules

    def lexeme(self, e: Expr, lazy: bool = False) -> Expr:
        """One lexeme: after a gap (the language over the terminals), or a rule of its own
        that the engine ends greedily (Grammar.lexer). A lexeme that may be empty is an
        optional non-empty one (as llguidance's `wrap | ε`)."""
        if not self.c.greedy:
            return seq(self.ign, e)
        key = (e, lazy)
        name = self.lexeme_rules.get(key)
        if name is None:
            name = self.lexeme_rules[key] = self.c.fresh("lex")
            body = nonempty_of(e, self.c.rules, self.c.fresh)
            self.c.rules[name] = body
            self.c.lexemes[name] = self.skip_rule
            self.c.lexeme_class[name] = self.cls
            if lazy:
                self.c.lazy.add(name)
        if self.lexeme_nullable.setdefault(key, _nullable_expr(e, self.c.rules)):
            return Repeat(RuleRef(name), 0, 1)
        return RuleRef(name)

    def token_rule(self, name: str, at: Node) -> str:
        if name not in self.token_rules:
            e = self.terminals.token_expr(name, at, ())
            self.token_rules[name] = self.c.fresh(name)
            self.c.rules[self.token_rules[name]] = e
        return self.token_rules[name]

    def rule_expr(self, n: Node) -> Expr:
        k = n.kind
        if k == "seq":
            return seq(*(self.rule_expr(x) for x in n.kids))
        if k == "alt":
            return alt(*(self.rule_expr(x) for x in n.kids))
        if k == "rep":
            return repeat(n, self.rule_expr(n.kids[0]))
        if k == "ref":
            if n.tok.type == "TOKEN":
                return self.lexeme(RuleRef(self.token_rule(n.data, n)))
            if n.data not in self.rule_names:
                raise LarkProblem(f"unknown name: '{n.data}'", n.tok)
            return RuleRef(self.rule_names[n.data])
        if k == "str" and decode_string(n.tok)[0] == "":
            return EMPTY  # as llguidance: "" is no lexeme, so no gap follows it
        if k in ("str", "range", "re", "regex_ext"):
            return self.lexeme(self.terminals.term(n, ()))
        if k == "and":
            raise LarkProblem("& is only supported for terminals, not rules", n.tok)
        if k == "not":
            raise LarkProblem("~ (complement) is only supported for terminals, not rules", n.tok)
        if k == "special":
            return self.lexeme(special_token(n.tok))
        if k == "json":
            return self.lexeme(self._json(n))
        if k == "nested":  # (greedy: its lexemes are lexemes of their own, with its skip)
            return self._nested(n) if self.c.greedy else self.lexeme(self._nested(n))
        raise LarkProblem(f"grammar references ({n.tok}) are not supported: there is only one grammar", n.tok)

    def _json(self, n: Node) -> Expr:
        schema = n.data
        if not isinstance(schema, (dict, bool)):
            raise LarkProblem("failed to compile inline JSON schema: a schema is a JSON object or a boolean", n.tok)
        options = self.c.options
        escapes: tuple[str, bool] | None = None
        if isinstance(schema, dict) and "x-guidance" in schema:
            schema = dict(schema)
            options, escapes = _guidance_options(schema.pop("x-guidance"), options, n.tok)
        where = f"{self.c.source}:{n.tok.line}:{n.tok.column} %json"
        try:
            g = schema_to_grammar(schema, options, source=where)
        except SchemaError as e:
            raise LarkProblem(f"failed to compile JSON schema: {e}", n.tok) from None
        if escapes is not None:
            g = restrict_escapes(g, *escapes)
        return self.c.embed(g, "json")

    def _nested(self, n: Node) -> Expr:
        if self.c.nested >= MAX_NESTED_GRAMMARS:
            raise LarkProblem(f"%lark blocks nested deeper than {MAX_NESTED_GRAMMARS} levels", n.tok)
        self.c.nested += 1
        try:
            items = parse_items(self.c.text, n.data.start, n.data.end)
            inner = Scope(self.c, items, top=False)
            inner.parent_cls = self.cls
            try:
                return RuleRef(inner.build(prefix="lark"))
            except LarkProblem as p:
                if p.reason.startswith("no start rule"):
                    raise LarkProblem("failed to compile nested Lark grammar: it has no start rule", n.tok) from None
                raise
        finally:
            self.c.nested -= 1

    def _set_class(self) -> None:
        """This grammar's lexeme class: a new one, or the class of an earlier grammar with
        the same skip (llguidance shares them, so a block whose `%ignore` is its parent's
        allows the skip before its first lexeme)."""
        key = self.c.rules[self.skip_rule] if self.skip_rule else None
        cls = self.c.class_of_skip.get(key)
        if cls is None:
            cls = self.c.class_of_skip[key] = len(self.c.class_skips)
            self.c.class_skips.append(self.skip_rule)
            self.c.class_parents.append(self.parent_cls)
        self.cls = cls
        if self.skip_rule:
            self.c.lexeme_class[self.skip_rule] = cls

    def build(self, prefix: str = "") -> str:
        """Compile every rule; the IR name of this grammar's root (its start rule, or the
        start rule without a gap before the first lexeme)."""
        if "start" not in self.rule_defs:
            raise LarkProblem("no start rule: a Lark grammar starts at the rule named `start`", None, pos=0)
        plain = self.top and (not self.ignores or self.c.greedy)
        for name in self.rule_defs:
            want = f"{prefix}-{name}" if prefix else name
            self.rule_names[name] = "root" if plain and name == "start" else self.c.fresh(want)
        if self.ignores and self.c.greedy:  # one skip lexeme, ended greedily as the others
            self.skip_rule = self.c.fresh(f"{prefix}-skip" if prefix else "skip")
            skips = alt(*(self.terminals.term(x, ()) for x in self.ignores))
            self.c.rules[self.skip_rule] = nonempty_of(skips, self.c.rules, self.c.fresh)
            self.c.lexemes[self.skip_rule] = None
            if self.top:
                self.c.top_skip = self.skip_rule
                self.c.initial_skip = self.initial_skip
        elif self.ignores:
            ign = self.c.fresh(f"{prefix}-ignore" if prefix else "ignore")
            gaps = alt(*(_unrepeated(self.terminals.term(x, ())) for x in self.ignores))
            self.c.rules[ign] = Repeat(gaps, 0, None)
            self.ign = RuleRef(ign)
        if self.c.greedy:
            self._set_class()
        existing = set(self.c.rules)
        for name, d in self.rule_defs.items():
            if name in self.lazy_rules:
                body, lazy, nullable = self._lazy_body(name)
                lexeme = self.lexeme(body, lazy=lazy)
                if self.c.greedy and nullable and lazy:
                    lexeme = Repeat(lexeme, 0, 1)
                self.c.rules[self.rule_names[name]] = lexeme
            else:
                self.c.rules[self.rule_names[name]] = self.rule_expr(d.body)  # type: ignore[arg-type]
        start = self.rule_names["start"]
        written = reachable_rules(Grammar(self.c.rules, root=start))
        remove_left_recursion(self.c.rules, set(self.rule_names.values()), self.c.source, self.c.fresh)
        self._drop_rewritten(existing, written, start)
        if plain:
            return start
        root = "root" if self.top else self.c.fresh(f"{prefix}-root")
        if self.initial_skip or not self.ignores or self.c.greedy:
            self.c.rules[root] = RuleRef(start)
        else:
            own = set(self.rule_names.values())
            before = reachable_rules(Grammar(self.c.rules, root=start))
            self.c.rules[root] = LeadingGaps(self.c.rules, own, self.ign.name, self.c.fresh).root(start)  # type: ignore[union-attr]
            for n in before - reachable_rules(Grammar(self.c.rules, root=root)):
                del self.c.rules[n]  # replaced by their variants without a leading gap
        return root


def _unrepeated(e: Expr) -> Expr:
    """`x` for `x+` (and `x*`): (x+)* is x*, and one loop is far cheaper to step than two."""
    while isinstance(e, Repeat) and e.min <= 1 and e.max is None:
        e = e.item
    return e


def _guidance_options(x: Any, options: SchemaOptions, tok: Token) -> tuple[SchemaOptions, tuple[str, bool] | None]:
    """SchemaOptions with llguidance's `x-guidance` JSON options applied (those that map),
    and its escapes (the characters allowed after a backslash, `\\u` of any character in
    free strings?) where it names them (grammar/lark/json_escapes.py)."""
    if not isinstance(x, dict):
        raise LarkProblem("failed to compile JSON schema: x-guidance must be an object", tok)
    values = options.to_dict()
    letters, general, named = DEFAULT_ESCAPES, False, False
    for k, v in x.items():
        if k == "json_allowed_escapes" and isinstance(v, str):
            letters, named = v, True
            continue
        if k == "json_allow_general_unicode_escapes" and isinstance(v, bool):
            general, named = v, True
            continue
        if k == "whitespace_flexible" and isinstance(v, bool):
            values["whitespace"] = "flexible" if v else "compact"
        elif k == "lenient" and isinstance(v, bool):  # llguidance's lenient also reads oneOf as anyOf
            values["lenient"] = values["oneof_as_anyof"] = v
        elif k == "coerce_one_of" and isinstance(v, bool):
            values["oneof_as_anyof"] = v
        else:
            raise LarkProblem(f"failed to compile JSON schema: x-guidance option {k!r} is not supported", tok)
    return SchemaOptions(**values), ((letters, general) if named else None)


def compile_items(text: str, source: str, options: SchemaOptions, lexer: str = "greedy") -> Grammar:
    """The Grammar of a whole Lark text (root rule `root`), read with greedy lexemes
    (`lexer="greedy"`, as llguidance) or as the language over its terminals ("cfl")."""
    c = Compiler(text, source, options, lexer)
    items = parse_items(text)
    Scope(c, items, top=True).build()
    order = {"root": c.rules["root"]} | {n: b for n, b in c.rules.items() if n != "root"}
    spec = None
    if c.greedy:
        spec = Lexer(
            lexemes=frozenset(c.lexemes),
            lazy=frozenset(c.lazy),
            skip=tuple(sorted((n, k) for n, k in c.lexemes.items() if k is not None)),
            top_skip=c.top_skip,
            initial_skip=c.initial_skip,
            classes=tuple(sorted(c.lexeme_class.items())) if len(c.class_skips) > 1 else (),
            class_skips=tuple(c.class_skips) if len(c.class_skips) > 1 else (),
            class_parents=tuple(c.class_parents) if len(c.class_skips) > 1 else (),
        )
    return Grammar(order, root="root", source=source, warnings=c.warnings, lexer=spec)


def _nullable_expr(e: Expr, rules: dict[str, Expr]) -> bool:
    from ministruct.grammar.analysis import is_nullable, nullable_rules

    refs = any(isinstance(x, RuleRef) for x in walk(e))
    return is_nullable(e, nullable_rules(Grammar(dict(rules), root="")) if refs else set())


def nonempty_of(e: Expr, rules: dict[str, Expr], fresh: Callable[[str], str]) -> Expr:
    """The non-empty strings of `e` (rules it refers to that may be empty get a non-empty
    variant of their own, added to `rules`)."""
    from ministruct.grammar.analysis import nullable_rules

    if not _nullable_expr(e, rules):
        return e
    nullable = nullable_rules(Grammar(dict(rules), root="")) if any(isinstance(x, RuleRef) for x in walk(e)) else set()
    made: dict[str, str] = {}

    def eps(x: Expr) -> bool:
        from ministruct.grammar.analysis import is_nullable

        return is_nullable(x, nullable)

    def ne(x: Expr) -> Expr:
        if isinstance(x, Literal):
            return NOTHING if x.text == "" else x
        if isinstance(x, RuleRef):
            if x.name not in nullable:
                return x
            if x.name not in made:
                made[x.name] = fresh(f"{x.name}-nonempty")
                rules[made[x.name]] = NOTHING
                rules[made[x.name]] = ne(rules[x.name])
            return RuleRef(made[x.name])
        if isinstance(x, Seq):
            a, rest = x.items[0], seq(*x.items[1:])
            first = seq_all(ne(a), rest)
            return alt_some(first, ne(rest)) if eps(a) else first
        if isinstance(x, Alt):
            return alt_some(*(ne(o) for o in x.options))
        if isinstance(x, Repeat):
            if x.max == 0:
                return NOTHING
            return seq_all(ne(x.item), Repeat(x.item, max(x.min - 1, 0), None if x.max is None else x.max - 1))
        return x  # CharClass, TokenRef

    return ne(e)


__all__ = ["compile_items", "GrammarError"]

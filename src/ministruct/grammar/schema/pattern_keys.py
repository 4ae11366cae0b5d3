"""Keys of additional properties sorted by patterns: one DFA over the decoded key tells
which `patternProperties` patterns it matches, whether it is a listed name, whether a
`propertyNames` pattern and witness patterns find it (schema objects, objects.py)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Optional

from ministruct.grammar.ir import KEY_SEGMENT, NOTHING, CharClass, Expr, Literal, Mark, Repeat, RuleRef, alt, seq
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.context import SchemaContext
from ministruct.grammar.schema.formats import STRING_UNIT, encode_chars
from ministruct.grammar.schema.keywords import ANNOTATIONS


def _dead(e: Optional[Expr]) -> bool:
    return e is None or e == NOTHING


def extra_member(c: SchemaContext, ptr: str, body: Expr) -> RuleRef:
    """The rule of one additional member: with marks, its pointer segment is the key the
    output writes (KEY_SEGMENT, filled in by engine/positions.py)."""
    if c.marking:
        ref = c.marked(f"kv{ptr}", body, Mark(KEY_SEGMENT, "structure"))
        if isinstance(ref, RuleRef):
            return ref
    return c.rule(f"kv{ptr}", body)


MAX_PATTERNS = 16  # patterns sorted by one key automaton (its states are bounded too)


def name_pattern(pn: Any) -> Optional[str]:
    """The regex of a propertyNames schema that is only `pattern`, or only lists names
    (`enum`, `const`; names are strings: other values name nothing), with type string."""
    if not isinstance(pn, dict) or pn.get("type", "string") != "string":
        return None
    keys = set(pn) - ANNOTATIONS - {"type"}
    if keys == {"pattern"} and isinstance(pn["pattern"], str):
        return pn["pattern"]
    listed = [pn["const"]] if keys == {"const"} else pn["enum"] if keys == {"enum"} else None
    if not isinstance(listed, list):
        return None
    names = [re.escape(x) for x in dict.fromkeys(x for x in listed if isinstance(x, str))]
    return f"\\A(?:{'|'.join(names)})\\Z" if names else "[^\\s\\S]"


_PLAIN_GROUPS = re.compile(r"\\[0-9]|\(\?(?!:)")  # backreferences, flags, named groups, lookarounds


def names_of_branches(pn: Any, resolve: Any) -> Any:
    """A propertyNames schema that is an anyOf (or a oneOf whose patterns no name matches
    together) of name patterns or lists, as one pattern found where one of theirs is
    (`(?:A)|(?:B)`); `resolve` folds a branch's `$ref`. `pn` itself when it is not."""
    from ministruct.grammar.schema.disjoint import _no_common_string

    if not isinstance(pn, dict) or pn.get("type", "string") != "string":
        return pn
    kws = [k for k in ("anyOf", "oneOf") if isinstance(pn.get(k), list) and pn[k]]
    if len(kws) != 1 or set(pn) - ANNOTATIONS - {"type", kws[0]}:
        return pn
    branches = [resolve(b) for b in pn[kws[0]]]
    # (a branch of another type names nothing: names are strings)
    pats = [name_pattern(b) for b in branches if not (isinstance(b, dict) and _not_string(b.get("type", "string")))]
    if any(p is None or _PLAIN_GROUPS.search(p) for p in pats):
        return pn
    if kws[0] == "oneOf" and not all(_no_common_string([a, b]) for i, a in enumerate(pats) for b in pats[i + 1 :]):
        return pn
    return {"type": "string", "pattern": "|".join(f"(?:{p})" for p in pats) or "[^\\s\\S]"}


def _not_string(t: Any) -> bool:
    return t != "string" if isinstance(t, str) else isinstance(t, list) and "string" not in t


@lru_cache(maxsize=256)
def _key_dfa(pats: tuple[str, ...], names: tuple[str, ...], pn_pat: Optional[str], found: tuple[str, ...] = ()) -> Any:
    """One DFA sorting a decoded key by the patterns it matches (components 0..), whether it
    is a listed name (the next), with a propertyNames pattern whether it matches that (the
    next), then whether it matches each of `found` (witness patterns). (Cached: the object
    of a schema is often compiled once per merged variant.)"""
    from ministruct.grammar.regex.parse import parse_regex
    from ministruct.grammar.schema.complement import KeyDFA, build_dfa, inline_rules
    from ministruct.grammar.schema.lookaheads import split_lookaheads, trailing_found

    def searched(p: str, source: str) -> Expr:
        return inline_rules(parse_regex(f"[\\s\\S]*(?:{trailing_found(p)})[\\s\\S]*", source=source))

    comps: list[Expr] = []
    reads = []  # per pattern: (its component, the required ones, the forbidden ones)
    for p in pats:
        la = split_lookaheads(p)  # `^(?=A)(?!B)R`: R and A found, B not (lookaheads.py)
        parts = [p] if la is None else [la.rest, *la.required, *la.forbidden]
        first = len(comps)
        comps += [searched(x, "patternProperties") for x in parts]
        n_req = 0 if la is None else len(la.required)
        reads.append((first, range(first + 1, first + 1 + n_req), range(first + 1 + n_req, first + len(parts))))
    shift = len(comps) - len(pats)  # (the components after the patterns', as pattern_extras numbers them)
    first_other = len(comps)
    comps.append(alt(*[Literal(n) for n in names]) if names else NOTHING)
    if pn_pat is not None:
        comps.append(searched(pn_pat, "propertyNames"))
    comps += [searched(p, "not") for p in found]
    dfa = build_dfa(comps)
    if not shift:
        return dfa

    def relabel(lab: frozenset[int]) -> frozenset[int]:
        own = [r in lab and all(q in lab for q in req) and not any(q in lab for q in forb) for r, req, forb in reads]
        return frozenset(i for i, hit in enumerate(own) if hit) | frozenset(x - shift for x in lab if x >= first_other)

    return KeyDFA(dfa.states, [relabel(lab) for lab in dfa.labels], dfa.free, dfa.work)


def pattern_extras(
    c: SchemaContext,
    ptr: str,
    depth: int,
    names: list[str],
    ap: Any,
    pp: dict,
    pn_pat: Optional[str] = None,
    found: "tuple[tuple[str, Any], ...]" = (),
    pairs: "Optional[list[tuple[dict, Any]]]" = None,
) -> Optional[Expr]:
    """Additional members under patternProperties, exactly: one DFA over the decoded key
    sorts it into "matches exactly the patterns M" (M possibly empty) or "is a listed
    name" (excluded: listed names are members of their own); the value must satisfy
    allOf(pattern schemas of M), or additionalProperties when M is empty. A
    propertyNames pattern is one more component every additional key must match; so is
    each (pattern, schema) of `found` (a witness), whose schema the value also satisfies.
    `pairs` (merged parts' (patternProperties, additionalProperties), KEY_PARTS) in place of
    `pp` and `ap`: the value satisfies, for each pair, its patterns' schemas of M, or else
    its additionalProperties."""
    from ministruct.errors import GrammarSyntaxError, SchemaError
    from ministruct.grammar.schema.complement import ComplementError, live_states

    why = "with additionalProperties other than false is not enforced"
    pats = list(pp) if pairs is None else list(dict.fromkeys(p for kp, _ in pairs for p in kp))
    if len(pats) > MAX_PATTERNS:
        c.unsupported("patternProperties", ptr, f"with more than {MAX_PATTERNS} patterns is not enforced")
        return None
    try:
        if not all(isinstance(p, str) for p in pats):
            raise ComplementError("pattern is not a string")
        if not all(isinstance(p, str) for p, _ in found):
            raise ComplementError("pattern is not a string")
        dfa = _key_dfa(tuple(pats), tuple(names), pn_pat, tuple(p for p, _ in found))
    except (GrammarSyntaxError, ComplementError, RecursionError):
        c.unsupported("patternProperties", ptr, why)
        return None
    excluded = len(pats)  # component index of the listed names
    first_found = excluded + 1 + (pn_pat is not None)  # component index of found[0]
    values: dict[frozenset, Expr] = {}
    wanted = [s for _, s in found if s is not True]

    def of_pairs(m: frozenset) -> list:
        subs = []
        for kp, kap in pairs or ():
            hits = [s for p, s in kp.items() if pats.index(p) in m]
            subs += hits if hits else [kap]
        return [s for s in subs if s is not True]

    def value_for(m: frozenset) -> Expr:
        if m not in values:
            if pairs is not None:
                subs = of_pairs(m) + wanted
                v = c.value(
                    True if not subs else subs[0] if len(subs) == 1 else {"allOf": subs},
                    f"{ptr}/patternProperties",
                    depth + 1,
                )
            elif not m and not wanted:
                v = c.value(ap, f"{ptr}/additionalProperties", depth + 1)
            elif len(m) == 1 and not wanted:
                (i,) = m
                v = c.value(pp[pats[i]], f"{ptr}/patternProperties/{pointer_token(pats[i])}", depth + 1)
            else:
                subs = [pp[pats[i]] for i in sorted(m)] if m else [ap]
                try:
                    v = c.value({"allOf": subs + wanted}, f"{ptr}/patternProperties", depth + 1)
                except SchemaError:
                    if not getattr(c, "lenient", False):
                        raise  # (it names the keyword and pointer that could not be)
                    c.unsupported("patternProperties", ptr, why)
                    v = NOTHING
            if c.marking and not _dead(v):
                v = c.marked(f"pval{ptr}", v, Mark(None, "value"))
            elif not _dead(v) and not isinstance(v, (Literal, RuleRef)):
                v = c.rule(f"pval{ptr}", v)
            values[m] = v
        return values[m]

    def allowed(lab: frozenset) -> bool:
        return (
            excluded not in lab
            and (pn_pat is None or excluded + 1 in lab)
            and all(first_found + j in lab for j in range(len(found)))
        )

    def own(lab: frozenset) -> frozenset:
        return frozenset(i for i in lab if i < excluded)

    accepting = {s for s, lab in enumerate(dfa.labels) if allowed(lab) and not _dead(value_for(own(lab)))}
    live = live_states(dfa, accepting)
    if 0 not in live:
        return None
    refs = {s: RuleRef(c.fresh(f"pkey{ptr}")) for s in sorted(live)}
    colon = c.marked(f"pcolon{ptr}", c.colon(), Mark(None, "structure"))  # in a key rule, not of the key
    close = seq(Literal('"'), colon)
    for s in sorted(live):
        opts: list[Expr] = []
        if s in accepting:
            opts.append(seq(close, values[own(dfa.labels[s])]))
        if s == dfa.free:
            body = seq(Repeat(STRING_UNIT, 0, None), *opts)
        else:
            for rs, t in dfa.states[s]:
                if t in live:
                    opts.append(seq(encode_chars(CharClass(rs)), refs[t]))
            body = alt(*opts)
        c.define(refs[s].name, body)
        c.mark(refs[s].name, Mark(None, "key"))
    return extra_member(c, ptr, seq(c.marked(f"pquote{ptr}", Literal('"'), Mark(None, "key")), refs[0]))

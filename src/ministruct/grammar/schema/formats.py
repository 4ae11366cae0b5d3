"""JSON string building blocks for the JSON Schema front end: string syntax and `format`
grammars (string-length arithmetic on IR expressions: lengths.py).

Two levels: *decoded* expressions describe the string value (code points, as `pattern`
and `format` see it); `encode_chars` turns one into the JSON text between the quotes
(raw characters, short escapes, and `\\uXXXX` escapes for BMP characters).
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Optional

from ministruct.grammar.ir import (
    EMPTY,
    MAX_CODE_POINT,
    Alt,
    CharClass,
    Expr,
    Literal,
    Repeat,
    Seq,
    alt,
    normalize_ranges,
    seq,
)

HEX_VALUES = "0123456789abcdef"


def C(spec: str, negated: bool = False) -> CharClass:
    """CharClass from a compact spec like 'a-zA-Z0-9_' (a '-' at either end is literal)."""
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            ranges.append((ord(spec[i]), ord(spec[i + 2])))
            i += 3
        else:
            ranges.append((ord(spec[i]), ord(spec[i])))
            i += 1
    return CharClass(normalize_ranges(ranges), negated)


def L(text: str) -> Literal:
    return Literal(text)


def rep(e: Expr, lo: int, hi: Optional[int] = None) -> Repeat:
    return Repeat(e, lo, hi)


def opt(e: Expr) -> Repeat:
    return Repeat(e, 0, 1)


# ------------------------------------------------------------ hex escapes


def _hex_digit(lo: int, hi: int) -> Expr:
    """One hex digit with value lo..hi, either case."""
    rs = []
    for v in range(lo, hi + 1):
        c = HEX_VALUES[v]
        rs.append((ord(c), ord(c)))
        if c.isalpha():
            rs.append((ord(c.upper()), ord(c.upper())))
    return CharClass(normalize_ranges(rs))


ANY_HEX = _hex_digit(0, 15)


def _hex_fixed(a: str, b: str) -> Expr:
    """Hex strings (either case) of len(a) between a and b (lowercase, same length)."""
    if not a:
        return EMPTY
    if a == b:
        return seq(*[_hex_digit(int(c, 16), int(c, 16)) for c in a])
    da, db = int(a[0], 16), int(b[0], 16)
    n = len(a) - 1
    if da == db:
        return seq(_hex_digit(da, da), _hex_fixed(a[1:], b[1:]))
    if a[1:] == "0" * n and b[1:] == "f" * n:
        return seq(_hex_digit(da, db), rep(ANY_HEX, n, n) if n else EMPTY)
    opts = [seq(_hex_digit(da, da), _hex_fixed(a[1:], "f" * n))]
    if db - da > 1:
        opts.append(seq(_hex_digit(da + 1, db - 1), rep(ANY_HEX, n, n) if n else EMPTY))
    opts.append(seq(_hex_digit(db, db), _hex_fixed("0" * n, b[1:])))
    return alt(*opts)


def u_escape(lo: int, hi: int) -> Expr:
    """`\\uXXXX` escapes for the BMP code points lo..hi."""
    return seq(L("\\u"), _hex_fixed(f"{lo:04x}", f"{hi:04x}"))


SHORT_ESCAPES = {
    0x22: '\\"',
    0x5C: "\\\\",
    0x2F: "\\/",
    0x08: "\\b",
    0x0C: "\\f",
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
}
RAW_OK = CharClass(((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)), negated=True)

# one decoded code point, any way JSON can write it (surrogate pairs count as one)
COUNTED_CHAR: Expr = alt(
    RAW_OK,
    seq(L("\\"), C('"\\\\/bfnrt')),
    u_escape(0, 0xD7FF),
    u_escape(0xE000, 0xFFFF),
    seq(u_escape(0xD800, 0xDBFF), u_escape(0xDC00, 0xDFFF)),
)
# any JSON string content unit (lone surrogate escapes included: Python's json accepts them)
STRING_UNIT: Expr = alt(RAW_OK, seq(L("\\"), alt(C('"\\\\/bfnrt'), seq(L("u"), rep(ANY_HEX, 4, 4)))))
ANY_STRING: Expr = seq(L('"'), rep(STRING_UNIT, 0), L('"'))


def _sub(ranges, lo: int, hi: int):
    """Intersection of ranges with [lo, hi]."""
    return [(max(a, lo), min(b, hi)) for a, b in ranges if max(a, lo) <= min(b, hi)]


MAX_ESCAPED_RANGES = 8


@lru_cache(maxsize=4096)
def encode_class(c: CharClass, max_escaped: int = MAX_ESCAPED_RANGES) -> Expr:
    """JSON text for one code point from the class (\\u escapes of non-ASCII characters
    only for classes of at most `max_escaped` ranges: callers that define the result once
    as a shared rule may allow more)."""
    if c.negated and not c.ranges:
        return COUNTED_CHAR
    rs = c.code_point_ranges()
    opts: list[Expr] = []
    raw = normalize_ranges([r for a, b in rs for r in _minus_unsafe(a, b) if not _only_surrogates(*r)])
    if raw:
        opts.append(CharClass(raw))
    for a, b in rs:
        for cp, esc in SHORT_ESCAPES.items():
            if a <= cp <= b:
                opts.append(L(esc))
    low = _sub(rs, 0, 0x1F) + _sub(rs, 0x22, 0x22) + _sub(rs, 0x5C, 0x5C)
    high = _sub(rs, 0x80, 0xD7FF) + _sub(rs, 0xE000, 0xFFFF)
    astral = _sub(rs, 0x10000, MAX_CODE_POINT)
    if len(high) + len(astral) > max_escaped:  # keep grammars small: raw form only
        high, astral = [], []
    if _only_surrogates(rs[0][0], rs[-1][1]) if rs else False:
        high += _sub(rs, 0xD800, 0xDFFF)  # a lone surrogate has no UTF-8 form: its escape alone writes it
    for a, b in low + high:
        opts.append(u_escape(a, b))
    for a, b in astral:
        opts.append(_pair_escapes(a, b))
    return alt(*opts) if opts else CharClass(())


def _pair_escapes(a: int, b: int) -> Expr:
    """Surrogate-pair escapes for astral code points a..b."""
    opts: list[Expr] = []
    ha, hb = 0xD800 + ((a - 0x10000) >> 10), 0xD800 + ((b - 0x10000) >> 10)
    if ha == hb:
        return seq(u_escape(ha, ha), u_escape(0xDC00 + ((a - 0x10000) & 0x3FF), 0xDC00 + ((b - 0x10000) & 0x3FF)))
    opts.append(seq(u_escape(ha, ha), u_escape(0xDC00 + ((a - 0x10000) & 0x3FF), 0xDFFF)))
    if hb - ha > 1:
        opts.append(seq(u_escape(ha + 1, hb - 1), u_escape(0xDC00, 0xDFFF)))
    opts.append(seq(u_escape(hb, hb), u_escape(0xDC00, 0xDC00 + ((b - 0x10000) & 0x3FF))))
    return alt(*opts)


def _only_surrogates(a: int, b: int) -> bool:
    return 0xD800 <= a and b <= 0xDFFF


def _minus_unsafe(a: int, b: int):
    out = []
    for lo, hi in ((0x20, 0x21), (0x23, 0x5B), (0x5D, MAX_CODE_POINT)):
        if max(a, lo) <= min(b, hi):
            out.append((max(a, lo), min(b, hi)))
    return out


def encode_chars(e: Expr, _done: Optional[dict] = None) -> Expr:
    """Map a decoded-string expression to the JSON string content that writes it (a
    sub-expression shared in the expression is encoded once, and shared in the result)."""
    done: dict = {} if _done is None else _done
    got = done.get(id(e))
    if got is not None:
        return got[1]
    if isinstance(e, Literal):
        out = seq(*[_encode_cp(ord(ch)) for ch in e.text]) if e.text else EMPTY
    elif isinstance(e, CharClass):
        out = encode_class(e)
    elif isinstance(e, Seq):
        out = seq(*[encode_chars(x, done) for x in e.items])
    elif isinstance(e, Alt):
        out = alt(*[encode_chars(x, done) for x in e.options])
    elif isinstance(e, Repeat):
        out = Repeat(encode_chars(e.item, done), e.min, e.max)
    else:
        out = e  # RuleRef: the caller encodes rule bodies too
    done[id(e)] = (e, out)  # (e kept alive: its id stays its own)
    return out


@lru_cache(maxsize=4096)
def _encode_cp(cp: int) -> Expr:
    if 0x20 <= cp < 0x7F and cp not in (0x22, 0x5C, 0x2F):
        return L(chr(cp))
    return encode_class(CharClass(((cp, cp),)))


def string_literal(s: str) -> Expr:
    """JSON text for the string s: `"..."`, accepting every escape form of each character."""
    return seq(L('"'), encode_chars(L(s)), L('"'))


# ------------------------------------------------------------ formats

D = C("0-9")
HEX = C("0-9a-fA-F")


def _date() -> Expr:
    year = alt(
        seq(L("0"), D, D, C("1-9")), seq(L("0"), D, C("1-9"), D), seq(L("0"), C("1-9"), D, D), seq(C("1-9"), D, D, D)
    )
    d31 = alt(seq(L("0"), C("1-9")), seq(C("12"), D), seq(L("3"), C("01")))
    d30 = alt(seq(L("0"), C("1-9")), seq(C("12"), D), L("30"))
    d28 = alt(seq(L("0"), C("1-9")), seq(L("1"), D), seq(L("2"), C("0-8")))
    m31 = alt(seq(L("0"), C("13578")), seq(L("1"), C("02")))
    m30 = alt(seq(L("0"), C("469")), L("11"))
    md = alt(seq(m31, L("-"), d31), seq(m30, L("-"), d30), seq(L("02-"), d28))
    leap_tail = alt(seq(L("0"), C("48")), seq(C("2468"), C("048")), seq(C("13579"), C("26")))
    leap = alt(seq(D, D, leap_tail), seq(leap_tail, L("00")))
    return alt(seq(year, L("-"), md), seq(leap, L("-02-29")))


def _time() -> Expr:
    hh = alt(seq(C("01"), D), seq(L("2"), C("0-3")))
    m60 = seq(C("0-5"), D)
    offset = alt(C("zZ"), seq(C("+-"), hh, L(":"), m60))
    frac = opt(seq(L("."), rep(D, 1)))
    # a leap second (:60) is valid only at 23:59 UTC; generated where the offset is zero
    # (each other offset pairs with one local hh:mm: 1,440 branches for a second that
    # happens once in years)
    leap = seq(L("23:59:60"), frac, alt(C("zZ"), L("+00:00"), L("-00:00")))
    return alt(seq(hh, L(":"), m60, L(":"), m60, frac, offset), leap)


def _duration() -> Expr:
    # RFC 3339 appendix A: each unit may be followed only by the next one down (a year by
    # months, not by days without them), and a number is 1*DIGIT
    n = rep(D, 1)

    def units(names: str) -> Expr:  # n X [n Y [n Z]], from the first unit named
        out: Expr = seq(n, L(names[-1]))
        for u in reversed(names[:-1]):
            out = seq(n, L(u), opt(out))
        return out

    date = alt(units("YMD"), units("MD"), units("D"))
    t = seq(L("T"), alt(units("HMS"), units("MS"), units("S")))
    return seq(L("P"), alt(seq(date, opt(t)), t, seq(n, L("W"))))


def _label(first: CharClass, most: int) -> Expr:
    """1 to `most` letters, digits and inner hyphens from `first` on, with no `--` in the
    third and fourth places: RFC 5890 reserves those labels, and its A-labels (`xn--`) must
    be valid Punycode of permitted code points, which a grammar cannot check."""
    an, ldh = C("a-zA-Z0-9"), C("a-zA-Z0-9-")
    rest = most - 2  # characters from the third on
    tail = alt(seq(an, opt(seq(rep(ldh, 0, rest - 2), an))), seq(L("-"), an, opt(seq(rep(ldh, 0, rest - 3), an))))
    return seq(first, opt(alt(an, seq(ldh, tail))))


def _hostname() -> Expr:
    # at most 4 labels of at most 62 characters: 251 characters, under the 253 limit; the
    # last starts with a letter (RFC 1123 2.1: never all digits, or it could read as IPv4)
    lab = _label(C("a-zA-Z0-9"), 62)
    return seq(rep(seq(lab, L(".")), 0, 3), _label(C("a-zA-Z"), 62))


def _ipv4() -> Expr:
    octet = alt(seq(L("25"), C("0-5")), seq(L("2"), C("0-4"), D), seq(L("1"), D, D), seq(C("1-9"), D), D)
    return seq(octet, L("."), octet, L("."), octet, L("."), octet)


def _ipv6() -> Expr:
    h16 = rep(HEX, 1, 4)
    h16c = seq(h16, L(":"))
    ls32 = alt(seq(h16, L(":"), h16), _ipv4())  # (RFC 3986: the last 32 bits may be written as IPv4)

    def head(n: int) -> Expr:  # [ *n( h16 ":" ) h16 ]
        return opt(seq(rep(h16c, 0, n), h16)) if n >= 0 else EMPTY

    return alt(
        seq(rep(h16c, 6, 6), ls32),
        seq(L("::"), rep(h16c, 5, 5), ls32),
        seq(opt(h16), L("::"), rep(h16c, 4, 4), ls32),
        seq(head(1), L("::"), rep(h16c, 3, 3), ls32),
        seq(head(2), L("::"), rep(h16c, 2, 2), ls32),
        seq(head(3), L("::"), h16c, ls32),
        seq(head(4), L("::"), ls32),
        seq(head(5), L("::"), h16),
        seq(head(6), L("::")),
    )


def _uri_parts(ip_literal: bool = True):
    unreserved = C("a-zA-Z0-9._~-")
    pct = seq(L("%"), HEX, HEX)
    sub = C("!$&'()*+,;=")
    pchar = alt(unreserved, pct, sub, C(":@"))
    segment = rep(pchar, 0)
    segment_nz = rep(pchar, 1)
    userinfo = rep(alt(unreserved, pct, sub, L(":")), 0)
    future = seq(L("v"), rep(HEX, 1), L("."), rep(alt(unreserved, sub, L(":")), 1))
    # IP-literal, or reg-name (which holds IPv4address)
    host = rep(alt(unreserved, pct, sub), 0)
    if ip_literal:
        host = alt(seq(L("["), alt(_ipv6(), future), L("]")), host)
    authority = seq(opt(seq(userinfo, L("@"))), host, opt(seq(L(":"), rep(D, 0, 5))))
    abempty = rep(seq(L("/"), segment), 0)
    absolute = seq(L("/"), opt(seq(segment_nz, abempty)))
    rootless = seq(segment_nz, abempty)
    qf = rep(alt(pchar, C("/?")), 0)
    tail = seq(opt(seq(L("?"), qf)), opt(seq(L("#"), qf)))
    nc = rep(alt(unreserved, pct, sub, L("@")), 1)
    return authority, abempty, absolute, rootless, tail, nc


def _uri(ip_literal: bool = True) -> Expr:
    authority, abempty, absolute, rootless, tail, _ = _uri_parts(ip_literal)
    scheme = seq(C("a-zA-Z"), rep(C("a-zA-Z0-9+.-"), 0))
    hier = alt(seq(L("//"), authority, abempty), absolute, rootless, EMPTY)
    return seq(scheme, L(":"), hier, tail)


def _uri_reference(ip_literal: bool = True) -> Expr:
    authority, abempty, absolute, _, tail, nc = _uri_parts(ip_literal)
    rel = seq(alt(seq(L("//"), authority, abempty), absolute, seq(nc, abempty), EMPTY), tail)
    return alt(_uri(ip_literal), rel)


def _email() -> Expr:
    # RFC 5321's Mailbox with a Dot-string local part (atoms of atext joined by single dots)
    # at a host name. A Quoted-string local part and an address literal (`[127.0.0.1]`,
    # `[IPv6:::1]`) are valid too, and not generated: written for machines more than people,
    # and they would be paths of the grammar few outputs want (a quoted local part is a
    # string within the string, with escapes of its own). The local part is as long as its
    # syntax allows: RFC 5321's 64 octets (4.5.3.1.1) is a size servers must at least take,
    # not syntax, and a loop is one parser configuration where counts made one per
    # character. The host name keeps DNS's limits (_hostname).
    atext = C("a-zA-Z0-9!#$%&'*+/=?^_`{|}~-")
    local = seq(rep(atext, 1), rep(seq(L("."), rep(atext, 1)), 0))
    return seq(local, L("@"), _hostname())


def _uuid() -> Expr:
    return seq(
        rep(HEX, 8, 8), L("-"), rep(HEX, 4, 4), L("-"), rep(HEX, 4, 4), L("-"), rep(HEX, 4, 4), L("-"), rep(HEX, 12, 12)
    )


def _json_pointer() -> Expr:
    ch = alt(CharClass(((0x2F, 0x2F), (0x7E, 0x7E)), negated=True), seq(L("~"), C("01")))
    return rep(seq(L("/"), rep(ch, 0)), 0)


REGEX_DEPTH = 6  # groups nested in a generated `format: regex` pattern


def _regex() -> Expr:
    """Patterns valid both as ECMA-262 regular expressions (with and without the `u` flag,
    as JSON Schema's `regex` format reads them) and for Python's `re` (the `jsonschema`
    package's check): literal characters, escapes both dialects read alike, `.`, classes
    (ranges within 0-9, a-z, A-Z, in order), groups `(...)` `(?:...)`, lookaheads (of no groups), `^ $ \\b
    \\B`, quantifiers `* + ? {n} {n,} {n,m}` (lazy or not; n <= m < 1000) on what can be
    repeated, and alternation, groups nested at most REGEX_DEPTH deep. Left out, as one of
    the dialects refuses or reads them otherwise: `{` `}` `]` unescaped, `{,n}`, named
    groups, lookbehinds, backreferences, `\\c`, `\\p`, octal escapes, `[]`, `[^]`."""
    syntax = "^$\\.*+?()[]{}|"
    literal = alt(
        CharClass(tuple((c, c) for c in range(0x20, 0x7F) if chr(c) not in syntax)),
        CharClass(((0xA0, 0xD7FF), (0xE000, 0xFFFD))),
    )
    hex_escape = alt(
        seq(L("\\x"), HEX, HEX),
        seq(L("\\u"), alt(seq(C("0-9a-cA-CefEF"), rep(HEX, 3, 3)), seq(C("dD"), C("0-7"), HEX, HEX))),
    )
    shorthand = seq(L("\\"), C("dDwWsS"))
    control = seq(L("\\"), C("nrtfv"))
    escape = alt(shorthand, control, seq(L("\\"), C("\\/.*+?()[]{}|^$")), hex_escape)
    class_char = CharClass(tuple((c, c) for c in range(0x20, 0x7F) if chr(c) not in "\\]-[^&~|"))
    class_escape = alt(shorthand, control, seq(L("\\"), C("\\][^./-")), hex_escape)
    ranges = []
    for first, last in (("0", "9"), ("a", "z"), ("A", "Z")):
        for c in range(ord(first), ord(last) + 1):
            ranges.append(seq(L(chr(c)), L("-"), CharClass(((c, ord(last)),))))
    class_item = alt(class_char, class_escape, *ranges)
    char_class = seq(L("["), opt(L("^")), rep(class_item, 1), L("]"))
    count = alt(L("0"), seq(C("1-9"), rep(D, 0, 2)))
    counted = alt(
        seq(L("{"), count, opt(L(",")), L("}")),
        *(seq(L("{" + str(d) + ","), _count_from(d), L("}")) for d in range(10)),
    )
    quantifier = seq(alt(C("*+?"), counted), opt(L("?")))
    assertion = alt(C("^$"), seq(L("\\"), C("bB")))
    simple = alt(literal, escape, L("."), char_class)
    # (a sequence of pieces and `|`s is a disjunction of alternatives, empty ones included)
    flat = rep(alt(seq(simple, opt(quantifier)), assertion, L("|")), 0)  # no groups: what a lookahead holds
    look = seq(alt(L("(?="), L("(?!")), flat, L(")"))
    inner: Expr = flat
    for _ in range(REGEX_DEPTH):  # each level once inside the next: an expression of linear size
        group = seq(alt(L("("), L("(?:")), inner, L(")"))
        inner = rep(alt(seq(alt(simple, group), opt(quantifier)), assertion, look, L("|")), 0)
    return inner


def _count_from(d: int) -> Expr:
    """The counts d..999, without leading zeros."""
    small = CharClass(((48 + d, 57),))
    return alt(small, seq(C("1-9"), rep(D, 1, 2)))


_BUILDERS = {
    "date": _date,
    "time": _time,
    "date-time": lambda: seq(_date(), C("tT"), _time()),
    "duration": _duration,
    "email": _email,
    "hostname": _hostname,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "uuid": _uuid,
    "uri": _uri,
    "uri-reference": _uri_reference,
    "json-pointer": _json_pointer,
    "regex": _regex,
}
SUPPORTED_FORMATS = frozenset(_BUILDERS)
ASCII_FORMATS = SUPPORTED_FORMATS - {"json-pointer", "regex"}  # formats whose strings are ASCII only
# formats some validator can check but ministruct does not enforce: an error (a warning when lenient)
KNOWN_UNSUPPORTED = frozenset(
    {"idn-email", "idn-hostname", "iri", "iri-reference", "uri-template", "relative-json-pointer"}
)


@cache
def format_expr(name: str) -> Expr:
    """Decoded-string expression for a supported format (a subset of the format's language)."""
    return _BUILDERS[name]()


SMALL_REPEAT = 8


@cache
def small_format_expr(name: str) -> Expr:
    """A sub-language of the format whose DFA is small, for products with patterns: no IP
    literals as URI hosts (`http://[::1]/`), and counted repetitions capped at
    SMALL_REPEAT (host name labels of at most 8 characters)."""
    e = {"uri": lambda: _uri(False), "uri-reference": lambda: _uri_reference(False)}.get(name, _BUILDERS[name])()
    return _capped(e, SMALL_REPEAT)


def _capped(e: Expr, cap: int) -> Expr:
    if isinstance(e, Repeat):
        top = e.max if e.max is None or e.max <= cap else max(e.min, cap)
        return Repeat(_capped(e.item, cap), e.min, top)
    if isinstance(e, Seq):
        return seq(*(_capped(x, cap) for x in e.items))
    if isinstance(e, Alt):
        return alt(*(_capped(x, cap) for x in e.options))
    return e


@cache
def python_class_ranges(shorthand: str) -> tuple[tuple[int, int], ...]:
    """Code point ranges Python's `re` matches for a shorthand like '\\\\d' (str patterns)."""
    text = "".join(map(chr, range(MAX_CODE_POINT + 1)))
    out = []
    for m in re.finditer(shorthand + "+", text):
        out.append((ord(text[m.start()]), ord(text[m.end() - 1])))
    return normalize_ranges(out)

"""Tool calls as text in a family's markup: written as the templates write them
(`write_calls`, for examples, the docs table and tests) and read back (`MarkupReader`, from
a text whose markup is written out: control tokens as their text)."""

from __future__ import annotations

import json
import re
from typing import Any

from ministruct.grammar.json_text import parse_json_prefix
from ministruct.grammar.schema.options import DEFAULT_WHITESPACE
from ministruct.grammar.tool_families import SPACED, ToolFamily
from ministruct.grammar.tool_markup import PIECE, Piece, json_type, markup_pieces, schema_types, value_end


def write_calls(family: ToolFamily, calls: list[tuple[str, Any]], *, parallel: bool | None = None) -> str:
    """Calls written in the family's markup, as its templates write them (a «?text» written,
    indexes from 0, Kimi K3's from 1; no ids): for examples and tests."""
    several = len(calls) > 1 if parallel is None else parallel
    open_, close = family.open, family.close
    if family.array_when_parallel:
        open_, close = ("[", "]") if several else ("", "")
    texts = [_write_call(family, name, args, i) for i, (name, args) in enumerate(calls)]
    return _fill(open_) + _fill(family.sep).join(texts) + _fill(close)


def _fill(text: str, **values: str) -> str:
    return PIECE.sub(lambda m: m.group(2) if m.group(1) else values.get(m.group(2), ""), text)


def _write_call(family: ToolFamily, name: str, args: Any, i: int) -> str:
    index = str(i + 1 if family.name == "kimi_k3" else i)
    if family.json_args:
        sep = (", ", ": ") if (family.layout or DEFAULT_WHITESPACE) == SPACED else (",", ":")
        body = json.dumps(args, ensure_ascii=False, separators=sep)
    else:
        keys = sorted(args, key=lambda k: (k.lower(), k)) if family.sorted_keys else list(args)
        body = family.param_sep.join(_write_param(family, k, args[k]) for k in keys)
    return _fill(family.call, name=name, index=index, args=body)


def _write_param(family: ToolFamily, key: str, value: Any) -> str:
    words = {True: "True", False: "False", None: "None"} if family.python_scalars else {}
    if family.values == "quoted":
        text = _gemma_text(family.quote, value)
    elif isinstance(value, str):
        text = family.quote + value + family.quote if family.values in ("quoted", "python") else value
    elif (value is None or isinstance(value, bool)) and words:
        text = words[value]
    else:
        text = json.dumps(value, ensure_ascii=False)
    kind = json_type(value)
    return _fill(family.param or "", key=key, value=text, type=kind, string="true" if kind == "string" else "false")


def _gemma_text(q: str, v: Any) -> str:
    """A value as Gemma 4's template writes it (format_argument, keys bare and sorted)."""
    if isinstance(v, str):
        return q + v + q
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_gemma_text(q, v[k])}" for k in sorted(v, key=lambda k: (k.lower(), k))) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_gemma_text(q, x) for x in v) + "]"
    return "None" if v is None else json.dumps(v)


def families_table() -> str:
    """The markdown table of every family's markup (docs/tools.md holds it; a test keeps them equal)."""
    from ministruct.grammar.tool_families import FAMILIES

    def code(s: str | None) -> str:
        return "`" + s.replace("\n", "\\n").replace("|", "\\|") + "`" if s else "none"

    rows = [
        '| `--tool-format` | models | one call: `get_weather(city="Paris")` | between calls | `auto` trigger '
        "| think: open ... close |",
        "|---|---|---|---|---|---|",
    ]
    for name, f in FAMILIES.items():
        one = write_calls(f, [("get_weather", {"city": "Paris"})])
        sep = "one call per message" if not f.parallel else (code(f.sep) if f.sep else "nothing")
        if f.array_when_parallel:
            sep = "a JSON array of calls"
        think = "none"
        if f.think:
            think = f"{code(f.think[0]) if f.think[0] else '(none)'} ... {code(f.think[1])}"
            think += f", then {code(f.think_gap)}" if f.think_gap else ""
            think += " (opened by the prompt)" if f.think_in_prompt else ""
        rows.append(f"| `{name}` | {f.models} | {code(one)} | {sep} | {code(f.trigger)} | {think} |")
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------- reading back


class MarkupError(ValueError):
    pass


class MarkupReader:
    """Reads a family's markup from a text (control tokens written as their text)."""

    def __init__(self, family: ToolFamily, text: str, pos: int, tools: dict[str, Any]) -> None:
        self.family, self.text, self.pos, self.tools = family, text, pos, tools  # tools: name -> parameters
        self.names = sorted(tools, key=len, reverse=True)

    def take(self, s: str) -> bool:
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.take(s):
            raise MarkupError(f"expected {s!r} at character {self.pos}")

    def pieces(self, text: str) -> None:
        for p in markup_pieces(text):
            if p.kind == "lit":
                self.expect(p.text)
            elif p.kind == "opt":
                self.take(p.text)
            else:
                raise MarkupError(f"unexpected placeholder {p.kind}")

    def take_pieces(self, text: str) -> bool:
        """Read a family text of literals and «?optional» parts, if it is there."""
        mark = self.pos
        try:
            self.pieces(text)
        except MarkupError:
            self.pos = mark
            return False
        return True

    def starts_call(self, call_text: str) -> bool:
        """Whether a call's markup begins here (its text up to the first placeholder)."""
        head = markup_pieces(call_text)[0]
        return head.kind != "lit" or self.text.startswith(head.text, self.pos)

    def call(self, call_text: str) -> tuple[str, Any, int]:
        """(name, arguments, offset of the name) of one call written as `call_text`."""
        start = self.pos
        errors = []
        for name in [*self.names, None]:  # None: a name no tool has (read, for the checker to refuse)
            self.pos = start
            try:
                return self._call_named(call_text, name)
            except MarkupError as e:
                errors.append(e)
        self.pos = start
        raise max(errors, key=_at)

    def _call_named(self, call_text: str, name: str | None) -> tuple[str, Any, int]:
        args: Any = None
        name_at = -1
        pieces = markup_pieces(call_text)
        for i, p in enumerate(pieces):
            if p.kind == "lit":
                self.expect(p.text)
            elif p.kind == "opt":
                self.take(p.text)
            elif p.kind == "name":
                name_at = self.pos
                if name is None:
                    name = self._regex(r"[A-Za-z0-9_.-]+", "a function name")
                else:
                    self.expect(name)
                nxt = pieces[i + 1] if i + 1 < len(pieces) else None
                if nxt is not None and nxt.kind == "lit" and not self.text.startswith(nxt.text[:1], self.pos):
                    raise MarkupError(f"expected {nxt.text[:1]!r} after the name at character {self.pos}")
            elif p.kind == "index":
                self._regex(r"[0-9]+", "a call index")
            elif p.kind == "id":
                self._regex(r', "id": "[^"\\]*"', "", optional=True)
            elif p.kind == "args":
                if self.family.json_args:
                    args = self._json()
                else:
                    args = self._params(self.tools.get(name, {}))  # type: ignore[arg-type]
        return name, args, name_at  # type: ignore[return-value]

    def _regex(self, pattern: str, what: str, optional: bool = False) -> str:
        m = re.compile(pattern).match(self.text, self.pos)
        if m is None:
            if optional:
                return ""
            raise MarkupError(f"expected {what} at character {self.pos}")
        self.pos = m.end()
        return m.group(0)

    def _json(self) -> Any:
        try:
            value, end = parse_json_prefix(self.text, self.pos)
        except json.JSONDecodeError as e:
            raise MarkupError(f"the arguments at character {self.pos} are not JSON: {e.msg}") from None
        self.pos = end
        return value

    def _params(self, schema: Any) -> dict:
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        keys = sorted(props, key=len, reverse=True)
        pieces = markup_pieces(self.family.param or "")
        first = pieces[0].text if pieces and pieces[0].kind == "lit" else ""
        out: dict = {}
        while True:
            mark = self.pos
            if out and self.family.param_sep and not self.take(self.family.param_sep):
                break
            if first and not self.text.startswith(first, self.pos):
                self.pos = mark
                break
            try:
                key, value = self._param(pieces, keys, props)
            except MarkupError:
                if not first:  # no opening markup: the parameters ended here
                    self.pos = mark
                    break
                raise
            if key in out:
                raise MarkupError(f"parameter {key} is given twice (at character {mark})")
            out[key] = value
        return out

    def _param(self, pieces: list[Piece], keys: list[str], props: dict) -> tuple[str, Any]:
        key: str | None = None
        label = None
        for i, p in enumerate(pieces):
            if p.kind == "lit":
                self.expect(p.text)
            elif p.kind == "opt":
                self.take(p.text)
            elif p.kind == "key":
                key = next(
                    (k for k in keys if self.text.startswith(k, self.pos) and self._key_ends(k, pieces, i)), None
                )
                if key is None:  # an undeclared name: read it, for the checker to name
                    nxt = pieces[i + 1].text[:1] if i + 1 < len(pieces) and pieces[i + 1].kind == "lit" else ""
                    stop = re.escape(nxt) if nxt else r"\s"
                    key = self._regex(f"[^{stop}<>\n]+", "a parameter name")
                else:
                    self.pos += len(key)
            elif p.kind in ("type", "string"):
                label = self._regex(r"[a-z]+", f"a {p.kind} attribute")
            elif p.kind == "value":
                after = pieces[i + 1].text if i + 1 < len(pieces) and pieces[i + 1].kind == "lit" else ""
                value = self._value(props.get(key, {}), label, after)
                return key, self._finish(value, pieces[i + 1 :])  # type: ignore[return-value]
        raise MarkupError("a parameter without a value")

    def _key_ends(self, k: str, pieces: list[Piece], i: int) -> bool:
        nxt = pieces[i + 1].text if i + 1 < len(pieces) and pieces[i + 1].kind == "lit" else ""
        return self.text.startswith(nxt[:1], self.pos + len(k)) if nxt else True

    def _finish(self, value: Any, rest: list[Piece]) -> Any:
        for p in rest:
            if p.kind == "lit":
                self.expect(p.text)
            elif p.kind == "opt":
                self.take(p.text)
        return value

    def _value(self, schema: Any, label: str | None, after: str) -> Any:
        fam = self.family
        types = schema_types(schema)
        if fam.values == "quoted":
            return self._gemma()
        if fam.values == "python":
            q = fam.quote
            if self.take(q):
                end = self.text.find(q, self.pos)
                if end < 0:
                    raise MarkupError(f"an unclosed string at character {self.pos}")
                s, self.pos = self.text[self.pos : end], end + len(q)
                return s
            if fam.python_scalars:
                for word, v in (("True", True), ("False", False), ("None", None)):
                    if self.take(word):
                        return v
            return self._json()
        string_only = types == ["string"] or label in ("string", "true")
        json_only = "string" not in types or label in ("false", "number", "boolean", "null", "object", "array")
        if json_only:
            if fam.python_scalars:
                for word, v in (("True", True), ("False", False), ("None", None)):
                    if json_type(v) in types and self.take(word):
                        return v
            return self._json()
        end_mark = value_end(fam)
        end = self.text.find(end_mark, self.pos)
        if end < 0:
            raise MarkupError(f"no {end_mark!r} after the value at character {self.pos}")
        raw = self.text[self.pos : end]
        words = {"True": True, "False": False, "None": None} if fam.python_scalars else {}
        if not string_only and raw in words and json_type(words[raw]) in types:
            self.pos = end
            return words[raw]
        if not string_only:
            try:
                v = json.loads(raw)
                if json_type(v) != "string" and json_type(v) in types:
                    self.pos = end
                    return v
            except ValueError:
                pass
        self.pos = end
        return raw


def _gemma_reader(self: MarkupReader) -> Any:
    """One value in Gemma 4's encoding (strings quoted, objects `{k:v,...}`, arrays, None)."""
    q = self.family.quote
    if self.take(q):
        end = self.text.find(q, self.pos)
        if end < 0:
            raise MarkupError(f"an unclosed string at character {self.pos}")
        s, self.pos = self.text[self.pos : end], end + len(q)
        return s
    if self.take("None"):
        return None
    if self.take("{"):
        obj: dict = {}
        while not self.take("}"):
            if obj:
                self.expect(",")
            key = self._regex(r"[^:{}\[\],<>]+", "a key")
            self.expect(":")
            obj[key] = self._gemma()
        return obj
    if self.take("["):
        arr: list = []
        while not self.take("]"):
            if arr:
                self.expect(",")
            arr.append(self._gemma())
        return arr
    return self._json()


MarkupReader._gemma = _gemma_reader  # type: ignore[attr-defined]


def _at(e: MarkupError) -> int:
    m = re.search(r"character (\d+)", str(e))
    return int(m.group(1)) if m else -1


__all__ = ["MarkupError", "MarkupReader", "families_table", "write_calls"]

"""Every output a server returns, checked by our own engine against the original constraint.

- schema: is the text a valid instance? (JSON parse, then `jsonschema`'s Draft 2020-12
  validator with its format checker: whatever whitespace and key order the server's own
  grammar allowed.) A rejection names the JSON pointer and keyword.
- regex, GBNF grammar, choice: an exact match of the whole text (`engine.check.check_text`).
  A rejection names line, column, byte offset and what was expected there.

`looks_unconstrained` tells a server that ignored the constraint from one that was merely
cut short: a constrained server can only ever return a prefix of the language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..constraints import Constraint
from ..engine.check import check_text

# first characters a JSON text can start with (after whitespace)
_JSON_STARTS = set('{["-0123456789tfn')


@dataclass
class Verdict:
    """Our check of one output: accepted or not, and where and why not."""

    ok: bool
    message: str | None = None
    position: dict[str, Any] | None = None  # {line, column, offset} or {pointer, keyword}
    expected: list[str] = field(default_factory=list)
    value: Any = None  # the parsed JSON, for a schema
    has_value: bool = False

    def fields(self) -> dict[str, Any]:
        """The result-record fields: `verified`, and on a rejection `check_error`, `check_position`, `check_expected`."""
        if self.ok:
            return {"verified": True}
        return {
            "verified": False,
            "check_error": self.message,
            "check_position": self.position,
            "check_expected": self.expected,
        }


class Verifier:
    """Checks outputs against one constraint (the schema validator is built once)."""

    def __init__(self, constraint: Constraint) -> None:
        self.constraint = constraint
        self._validator = None
        if constraint.kind == "schema":
            from jsonschema import Draft202012Validator

            self._validator = Draft202012Validator(constraint.schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    def __call__(self, text: str) -> Verdict:
        if self._validator is not None:
            return self._schema(text)
        res = check_text(self.constraint.grammar, text)
        if res.accepted:
            return Verdict(True)
        return Verdict(
            False,
            res.message(),
            {"line": res.line, "column": res.column, "offset": res.offset},
            list(res.expected),
        )

    def _schema(self, text: str) -> Verdict:
        try:
            value = json.loads(text)
        except ValueError as e:
            err: json.JSONDecodeError = e  # type: ignore[assignment]
            pos = getattr(err, "pos", 0)
            line, col = getattr(err, "lineno", 1), getattr(err, "colno", 1)
            offset = len(text[:pos].encode("utf-8", "surrogatepass"))
            msg = f"line {line}, column {col} (byte {offset}): not JSON: {getattr(err, 'msg', str(e))}"
            return Verdict(False, msg, {"line": line, "column": col, "offset": offset}, ["JSON"])
        from jsonschema.exceptions import best_match

        error = best_match(self._validator.iter_errors(value))  # type: ignore[union-attr]
        if error is None:
            return Verdict(True, value=value, has_value=True)
        pointer = "".join(f"/{_escape(p)}" for p in error.absolute_path)
        keyword = str(error.validator)
        schema_at = "".join(f"/{_escape(p)}" for p in error.absolute_schema_path)
        msg = f"at {pointer or '/'}: {error.message} (keyword {keyword} at schema {schema_at or '/'})"
        return Verdict(False, msg, {"pointer": pointer, "keyword": keyword}, [f"{keyword} at schema {schema_at or '/'}"], value, True)

    def looks_unconstrained(self, text: str, finish_reason: str | None) -> str | None:
        """Why a rejected output cannot have come from a server that enforced the constraint, or None.

        For regex, grammar and choice: the text is not even a prefix of the language. For a
        schema: the text is not JSON at all (it does not start like JSON, or the server
        stopped by itself on something that does not parse).
        """
        if self._validator is None:
            if check_text(self.constraint.grammar, text, prefix=True).accepted:
                return None
            return "not even a prefix of the constraint's language"
        stripped = text.lstrip()
        if not stripped or stripped[0] not in _JSON_STARTS:
            return f"not JSON at all{' (cut at max_tokens)' if finish_reason == 'length' else ''}"
        if finish_reason != "length":
            try:
                json.loads(text)
            except ValueError:
                return "not JSON, though the server stopped by itself"
        return None


def _escape(part: object) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")

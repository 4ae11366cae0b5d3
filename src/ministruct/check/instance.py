"""Is a text a valid JSON Schema instance? The `check --schema` question.

A grammar fixes one layout (key order, whitespace); validity does not care about
either. So the verdict comes from the `jsonschema` validator (the dialect the schema's
`$schema` names, Draft 2020-12 by default), after our own reading of the JSON text,
which reports a syntax error by line, column and byte offset.

`multipleOf` is read as the standard says (schema/multiples.py: 0.07 is a multiple of
0.01, which the `jsonschema` package's float division denies).

`format` is asserted (`format_assertion=True`, the default), as ministruct's generation
enforces it and as real-world schemas expect (JSONSchemaBench's invalid instances are
mostly format violations); Draft 2020-12 makes it an annotation unless a validator is
configured to assert it, which `format_assertion=False` gives. A schema violation names the JSON pointer of
the offending value and the keyword that failed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ministruct.check.result import CheckResult
from ministruct.errors import SchemaError
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.cycles import refuse_ref_cycles
from ministruct.grammar.schema.metaschema import check_schema, json_pointer, short_reason
from ministruct.grammar.schema.multiples import exact_validator


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


class InstanceChecker:
    """A compiled validator for one schema; `check(text)` per instance."""

    def __init__(
        self, schema: Any, *, source: str = "<schema>", registry: Any = None, format_assertion: bool = True
    ) -> None:
        """`registry`: a `referencing.Registry` of schemas that `$ref`s may name by URI."""
        from jsonschema import FormatChecker, exceptions

        cls = check_schema(schema, source=source)
        refuse_ref_cycles(schema, source)  # a validator would recurse on them until it gave up
        self.source = source
        options: dict[str, Any] = {}
        if registry is not None:
            options["registry"] = registry
        if format_assertion:  # every format the package knows, whatever the draft introduced it
            options["format_checker"] = FormatChecker()
        self.schema = schema
        self.validator = exact_validator(cls)(schema, **options)  # multipleOf as the standard reads it
        self._best_match = exceptions.best_match

    def check(self, text: str) -> CheckResult:
        """Parse `text` as JSON and validate it."""
        try:
            value = json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            offset = len(text[: e.pos].encode("utf-8", "surrogatepass"))
            return CheckResult(False, line=e.lineno, column=e.colno, offset=offset, reason=e.msg)
        except ValueError as e:  # NaN / Infinity
            return CheckResult(False, line=1, column=1, offset=0, reason=str(e))
        except RecursionError:
            return CheckResult(False, line=1, column=1, offset=0, reason="the text nests too deeply to read")
        try:
            return self.check_value(value)
        except RecursionError:
            return CheckResult(False, pointer="/", keyword=None, reason="the value nests too deeply to validate")

    def check_value(self, value: Any) -> CheckResult:
        """Validate an already parsed value."""
        from referencing.exceptions import Unresolvable

        try:
            err = self._best_match(self.validator.iter_errors(value))
        except Unresolvable as e:
            pointer, ref = _find_ref(self.schema, getattr(e, "ref", ""))
            raise SchemaError(
                f"$ref {json.dumps(ref)} points nowhere", pointer=pointer, keyword="$ref", source=self.source
            ) from None
        if err is None:
            return CheckResult(True)
        if err.validator is None:  # a `false` schema
            return CheckResult(
                False,
                pointer=json_pointer(err.absolute_path),
                keyword="false",
                reason="the schema allows no value here",
            )
        return CheckResult(
            False,
            pointer=json_pointer(err.absolute_path),
            keyword=str(err.validator),
            reason=short_reason(json_message(err.message, err.instance)),
        )


_PY_STRING = re.compile(r"'((?:[^'\\]|\\.)*)'")


def json_message(message: str, instance: Any) -> str:
    """A validator message with the Python reprs it quotes written as JSON (`None` ->
    `null`, `'a'` -> `"a"`)."""
    shown, head = repr(instance), ""
    if message.startswith(shown):
        text = json.dumps(instance, ensure_ascii=False)
        head, message = (text if len(text) <= 60 else text[:57] + "..."), message[len(shown) :]
    return head + _PY_STRING.sub(lambda m: json.dumps(m.group(1).replace("\\'", "'")), message)


def _find_ref(schema: Any, ref: str) -> tuple[str, str]:
    """(the JSON pointer, the text) of the first `$ref` in `schema` that names `ref`
    (its whole text, or its fragment); ('/', ref) when none does."""
    todo = [(schema, "")]
    while todo:
        node, ptr = todo.pop()
        if isinstance(node, dict):
            r = node.get("$ref")
            if isinstance(r, str) and (r == ref or r.endswith("#" + ref)):
                return f"{ptr}/$ref", r
            todo.extend((v, f"{ptr}/{pointer_token(k)}") for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            todo.extend((v, f"{ptr}/{i}") for i, v in reversed(list(enumerate(node))))
    return "/", ref

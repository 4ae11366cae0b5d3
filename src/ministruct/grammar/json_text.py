"""JSON text as RFC 8259 defines it. Python's `json` also reads NaN, Infinity and
-Infinity, which are not JSON: a schema `{"const": NaN}` would have ministruct generate
them, and a record `{"id": NaN}` would come back out as a line no JSON reader takes.

    value = parse_json(text)             # json.JSONDecodeError (a ValueError) if not JSON
    value, end = parse_json_prefix(text, pos)
    non_json_number(value)               # the pointer of a NaN or infinity in a Python value, or None
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ministruct.grammar.limits import pointer_token

_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)', re.S)


class _NotJson(Exception):
    """NaN or Infinity met inside the decoder (it does not say where: _where finds it)."""


def _refuse(name: str) -> Any:
    raise _NotJson(name)


_DECODER = json.JSONDecoder(parse_constant=_refuse)


def parse_json(text: str) -> Any:
    """The value of a JSON text."""
    try:
        return _DECODER.decode(text)
    except _NotJson as e:
        raise _constant_error(text, 0, str(e)) from None


def parse_json_prefix(text: str, pos: int = 0) -> tuple[Any, int]:
    """The JSON value starting at `pos` and the offset just past it."""
    try:
        return _DECODER.raw_decode(text, pos)
    except _NotJson as e:
        raise _constant_error(text, pos, str(e)) from None


def _constant_error(text: str, start: int, name: str) -> json.JSONDecodeError:
    """The error at the first NaN or Infinity after `start` outside a string (the text
    before it decoded, so its strings are whole)."""
    at = next((m.start(1) for m in _STRING_OR_CONSTANT.finditer(text, start) if m.group(1)), start)
    return json.JSONDecodeError(f"{name} is not a JSON number", text, at)


def non_json_number(value: Any) -> str | None:
    """The JSON pointer of a float in `value` that JSON cannot write (NaN,
    Infinity, -Infinity), else None: what a library caller's dict can hold and a text cannot."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        v, ptr = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return ptr or "/"
        if isinstance(v, dict):
            stack.extend((x, f"{ptr}/{pointer_token(str(k))}") for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, f"{ptr}/{i}") for i, x in enumerate(v))
    return None

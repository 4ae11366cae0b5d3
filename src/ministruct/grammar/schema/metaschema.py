"""Is a schema well formed? The check against its metaschema (its `$schema`, else Draft
2020-12), shared by the compiler (which falls back on it when a malformed schema trips
it) and by `check --schema` (instance.InstanceChecker)."""

from __future__ import annotations

from typing import Any

from ministruct.errors import SchemaError
from ministruct.grammar.limits import pointer_token

MAX_REASON = 200


def json_pointer(path: Any) -> str:
    """The JSON pointer of a path of keys and indexes ('/' for the root)."""
    parts = [pointer_token(str(p)) for p in path]
    return "/" + "/".join(parts) if parts else "/"


def short_reason(message: str) -> str:
    """A validator message on one line, at most MAX_REASON characters."""
    message = " ".join(message.split())
    return message if len(message) <= MAX_REASON else message[: MAX_REASON - 3] + "..."


def check_schema(schema: Any, *, source: str = "<schema>") -> Any:
    """The validator class for `schema`, after checking the schema against its
    metaschema; SchemaError naming the pointer and keyword if it is malformed."""
    from jsonschema import Draft202012Validator, exceptions, validators

    if not isinstance(schema, (dict, bool)):
        raise SchemaError(
            f"a schema must be an object or a boolean, not {type(schema).__name__}", pointer="/", source=source
        )
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as e:
        raise SchemaError(
            short_reason(e.message), pointer=json_pointer(e.absolute_path), keyword=str(e.validator), source=source
        ) from None
    return cls

"""Reading input records (JSONL or plain lines) and writing versioned JSONL records."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import IO, Any, Iterator

RECORD_VERSION = 1


@dataclass
class InputRecord:
    """One input line: its value for `field`, its id, or the error that makes it unusable."""

    index: int  # 1-based line number
    id: Any
    value: str | None
    error: str | None = None


def read_records(stream: IO[str], field: str, source: str = "<input>") -> Iterator[InputRecord]:
    """Yield one record per non-empty line.

    A line that is a JSON object with `field` or `id` is a record (and an error when
    `field` is missing or not a string); any other line is the value itself.
    """
    for n, raw in enumerate(stream, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        obj = None
        if line.lstrip().startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
        if isinstance(obj, dict) and (field in obj or "id" in obj):
            rid = obj.get("id", n)
            val = obj.get(field)
            if not isinstance(val, str):
                what = "missing" if field not in obj else f"not a string ({type(val).__name__})"
                yield InputRecord(n, rid, None, f"{source}:{n}: \"{field}\" is {what}")
                continue
            yield InputRecord(n, rid, val)
        else:
            yield InputRecord(n, n, line)


def dumps_record(obj: dict) -> str:
    """One JSONL line with the record version first."""
    return json.dumps({"v": RECORD_VERSION, **obj}, ensure_ascii=False)


def write_record(obj: dict, stream: IO[str] | None = None) -> None:
    out = stream or sys.stdout
    out.write(dumps_record(obj) + "\n")
    out.flush()

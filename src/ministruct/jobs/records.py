"""Reading input records (JSONL or plain lines) and writing versioned JSONL records.

Input lines are split on `\\n` only (never on U+2028, U+0085 or a lone `\\r`), read as
bytes and streamed one at a time, from a file or stdin alike. A UTF-8 BOM before the
first line is skipped, a `\\r` before the `\\n` is dropped, and blank lines are skipped
(line numbers, the default ids, still count them). A line that is not UTF-8 is an error
record. A line starting with `{` or `[` must be a JSON object carrying the value field
(`prompt` for gen, `text` for check); any other line is the value itself. Ids are
unique: a line whose id an earlier line has (its own `id`, or its line number when it
has none) is an error record naming that line.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Collection, Iterable, Iterator

from ministruct.errors import InputError, OutputClosed, OutputError
from ministruct.grammar.json_text import parse_json

RECORD_VERSION = 1
BOM = b"\xef\xbb\xbf"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass
class InputRecord:
    """One input line: its value for `field`, its id, per-record settings and extra fields,
    or the error that makes it unusable."""

    index: int  # 1-based line number
    id: Any
    value: str | None
    error: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # allowed per-record fields (seed, schema, ...)
    extra: dict[str, Any] = field(default_factory=dict)  # other fields, kept with --allow-extra-fields
    where: str = ""  # "source:line", for messages about this record
    id_given: bool = False  # the line has its own "id" (else the id is its line number)


@contextmanager
def open_lines(path: str, stdin: IO | None = None) -> Iterator[tuple[Iterator[bytes], str]]:
    """(lines as bytes, display name) of a file, or of stdin for '-'; InputError when unreadable."""
    if path == "-":
        stream = stdin if stdin is not None else sys.stdin
        yield iter(getattr(stream, "buffer", stream)), "<stdin>"
        return
    p = Path(path)
    try:
        f = open(p, "rb")
    except OSError as e:
        raise InputError.unreadable(path, "input", e) from None
    with f:
        yield _read_errors_named(f, path), str(path)


def _read_errors_named(f: IO[bytes], path: str) -> Iterator[bytes]:
    try:
        yield from f
    except OSError as e:
        raise InputError.unreadable(path, "input", e) from None


def count_lines(path: str) -> int | None:
    """The number of lines of a file, read in chunks (None for stdin, a pipe or a FIFO,
    which only the batch may read, or when unreadable)."""
    try:
        if path == "-" or not stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:
        return None
    n, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return None
    return n + (last != b"\n")


def split_lines(lines: Iterable[bytes | str]) -> Iterator[tuple[int, str | None, str | None]]:
    """(line number, text, error) per input line: split on \\n only, BOM and \\r\\n handled.

    Lines given as bytes are decoded here (a line that is not UTF-8 gives an error, and
    its text with U+FFFD for the bytes that are not); lines
    given as str are split again on \\n only (so a caller's str.splitlines cannot cut records).
    """
    n = 0
    for chunk in lines:
        pieces = [chunk] if isinstance(chunk, bytes) else chunk.split("\n")
        if isinstance(chunk, str) and pieces and pieces[-1] == "":
            pieces.pop()
        for raw in pieces:
            n += 1
            if isinstance(raw, bytes):
                if n == 1 and raw.startswith(BOM):
                    raw = raw[len(BOM) :]
                raw = raw[:-1] if raw.endswith(b"\n") else raw
                raw = raw[:-1] if raw.endswith(b"\r") else raw
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    err = f"not UTF-8 text (byte {e.start + 1} of the line is {raw[e.start]:#04x})"
                    yield n, raw.decode("utf-8", "replace"), err
                    continue
            else:
                text = raw[1:] if n == 1 and raw.startswith("\ufeff") else raw
                text = text[:-1] if text.endswith("\r") else text
            yield n, text, None


def read_records(
    stream: Iterable[bytes | str],
    field: str,
    source: str = "<input>",
    *,
    settings: Collection[str] = (),
    allow_extra: bool = False,
) -> Iterator[InputRecord]:
    """Yield one record per non-blank line (see the module docstring for the rules).

    A JSON line may carry `id`, `field` and the names in `settings`; any other field is an
    error naming it, unless `allow_extra` (then it is kept in `extra`). A line whose id an
    earlier line has is an error record naming that line (its own error, if any, first).
    """
    first_line: dict[str, int] = {}  # id (as JSON) -> the line that has it
    for n, line, err in split_lines(stream):
        where = f"{source}:{n}"
        if err is not None:
            rec = InputRecord(n, _readable_id(line, n), None, f"{where}: {err}", where=where)
        elif line is None or not line.strip():
            continue
        elif not line.lstrip().startswith(("{", "[")):
            rec = InputRecord(n, n, line, where=where)
        else:
            rec = _json_record(n, line, field, where, settings, allow_extra)
            rec.where = where
        key = json.dumps(rec.id, sort_keys=True, ensure_ascii=False)
        earlier = first_line.setdefault(key, n)
        if earlier != n and rec.error is None:
            own = "" if rec.id_given else ' (its line number: the line has no "id")'
            rec.error = f"{where}: id {json_text(rec.id)}{own} is already the id of line {earlier}; ids must be unique"
        yield rec


def _readable_id(text: str | None, n: int) -> Any:
    """The `id` of a JSON line that is not all UTF-8, when the id itself is (else `n`)."""
    try:
        obj = json.loads(text) if text and text.lstrip().startswith("{") else None
    except (ValueError, RecursionError):
        return n
    rid = obj.get("id") if isinstance(obj, dict) and obj.get("id") is not None else n
    return n if "\ufffd" in json.dumps(rid, ensure_ascii=False) else rid


def _json_record(
    n: int, line: str, field: str, where: str, settings: Collection[str], allow_extra: bool
) -> InputRecord:
    try:
        obj = parse_json(line)
    except json.JSONDecodeError as e:
        return InputRecord(n, n, None, f"{where}: not valid JSON: {e.msg} (column {e.colno})")
    except RecursionError:
        return InputRecord(n, n, None, f"{where}: not usable JSON: nested too deeply")
    if not isinstance(obj, dict):
        return InputRecord(n, n, None, f'{where}: a JSON line must be an object with "{field}", not an array')
    # a field given as null is as if absent (but `"system": null` is "no system message")
    rid = obj["id"] if obj.get("id") is not None else n
    val = obj.get(field)
    value = val if isinstance(val, str) else None
    known = {k: v for k, v in obj.items() if k in settings and (v is not None or k == "system")}
    extra = {k: v for k, v in obj.items() if k not in settings and k not in (field, "id")}
    rec = InputRecord(
        n, rid, value, settings=known, extra=extra if allow_extra else {}, id_given=obj.get("id") is not None
    )
    if field not in obj:
        rec.error = f'{where}: no "{field}" field'
    elif value is None:
        rec.error = f'{where}: "{field}" is not a string ({json_type(val)})'
    elif (bad := surrogate_error(value)) is not None:
        rec.error = f'{where}: "{field}" {bad}'
    elif extra and not allow_extra:
        names = ", ".join(f'"{k}"' for k in extra)
        allowed = ", ".join(f'"{k}"' for k in ("id", field, *settings))
        s = "s" if len(extra) > 1 else ""
        rec.error = (
            f"{where}: unknown field{s} {names} (allowed: {allowed}; --allow-extra-fields passes others through)"
        )
    return rec


def json_type(v: Any) -> str:
    """A JSON value's type in words, for messages (\"an object\", \"null\", ...)."""
    return {
        dict: "an object",
        list: "an array",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(v), type(v).__name__)


def json_text(value: Any, **kw: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, **kw)`, except that a lone surrogate (which
    UTF-8 cannot encode) is written as its `\\uXXXX` escape: the same JSON value, always
    writable."""
    text = json.dumps(value, ensure_ascii=False, **kw)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def surrogate_error(text: str) -> str | None:
    """What makes `text` unusable as model input: a lone surrogate (a JSON `\\ud800`
    escape, or a command-line byte that is not UTF-8); None when it is fine."""
    m = _SURROGATE.search(text)
    if m is None:
        return None
    cp, at = ord(m.group()), m.start() + 1
    if 0xDC80 <= cp <= 0xDCFF:  # how Python reads a byte that is not UTF-8 (surrogateescape)
        return f"is not UTF-8 text (character {at} is the byte {cp - 0xDC00:#04x}, or a lone surrogate U+{cp:04X})"
    return f"is not valid text: character {at} is a lone surrogate (U+{cp:04X}), which UTF-8 cannot encode"


def dumps_record(obj: dict) -> str:
    """One JSONL line with the record version first."""
    return json_text({"v": RECORD_VERSION, **obj})


def write_line(text: str, stream: IO[str] | None = None, name: str = "<stdout>", what: str = "") -> None:
    """Write one line and flush it. OutputClosed when the reader left (a closed pipe: a
    quiet end); OutputError naming the output for any other failure (a full disk)."""
    out = stream or sys.stdout
    try:
        out.write(text + "\n")
        out.flush()
    except OSError as e:
        raise output_error(e, name, what) from None


def output_error(e: OSError, name: str, what: str = "") -> OutputClosed | OutputError:
    """What a failed write to the output `name` (`what` it is: " the trace file") means:
    OutputClosed when the reader left (a closed pipe), else OutputError naming it (a full
    disk, an I/O error)."""
    if isinstance(e, BrokenPipeError) or e.errno == errno.EPIPE:
        return OutputClosed(f"{name}: the reader closed the pipe")
    return OutputError(f"{name}: cannot write{what}: {e.strerror or e}")


def write_record(obj: dict, stream: IO[str] | None = None) -> None:
    """One versioned JSONL record, flushed."""
    write_line(dumps_record(obj), stream)

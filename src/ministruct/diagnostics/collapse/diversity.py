"""Whole-output diversity over the seeds of one prompt, and the free control.

Diversity, per (schema, prompt, condition), over its generations (one per seed):
- distinct outputs (exact text);
- per field (each property, nested objects followed, an array taken as one value; a
  schema whose root is not an object has the one field `/`): the distinct values and
  the Shannon entropy of their empirical distribution in bits, an output that is not
  valid JSON counting as the value `(invalid)` and a missing field as `(missing)`; for
  a field with an `enum`, the entropy is over the enum's members (`enum_size`, `used`,
  and `max_bits` = log2 of the enum size).

The free control: the same prompts with the schema shown, generated without the
constraint. `parsed`: the output is JSON (`json.loads` of the stripped text); `fenced`:
it is JSON once a Markdown code fence around it is removed; `valid`: the parsed value
validates against the schema (jsonschema, the schema's own draft).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any, Iterable, Sequence

from ministruct.diagnostics.collapse.grid import GenerationGrid
from ministruct.grammar.limits import pointer_key, pointer_token

INVALID = "(invalid)"
MISSING = "(missing)"
FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```\s*$", re.S)


def schema_fields(schema: Any, pointer: str = "") -> dict[str, list | None]:
    """The fields of a schema: pointer -> its enum (or None); objects followed, arrays whole."""
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict) and "enum" not in schema:
        out: dict[str, list | None] = {}
        for name, sub in schema["properties"].items():
            out.update(schema_fields(sub, f"{pointer}/{pointer_token(name)}"))
        return out
    enum = schema.get("enum") if isinstance(schema, dict) else None
    if isinstance(schema, dict) and "const" in schema:
        enum = [schema["const"]]
    return {pointer: list(enum) if isinstance(enum, list) else None}


def _at(value: Any, pointer: str) -> Any:
    for seg in pointer.split("/")[1:]:
        seg = pointer_key(seg)
        if not isinstance(value, dict) or seg not in value:
            return MISSING
        value = value[seg]
    return value


def entropy_bits(values: Iterable[str]) -> float:
    """Shannon entropy (bits) of the empirical distribution of `values`."""
    counts = Counter(values)
    n = sum(counts.values())
    if n == 0:
        return 0.0
    return max(0.0, -math.fsum((c / n) * math.log2(c / n) for c in counts.values()))


def _canonical(v: Any) -> str:
    return v if v in (INVALID, MISSING) else json.dumps(v, ensure_ascii=False, sort_keys=True)


def parse_json(text: str) -> tuple[bool, Any]:
    """(parsed, value) of an output's stripped text."""
    try:
        return True, json.loads(text.strip())
    except ValueError:
        return False, None


def field_rows(outputs: Sequence[str], fields: dict[str, list | None]) -> list[dict]:
    """Per field: distinct values and entropy over the outputs (see the module)."""
    parsed = [parse_json(o) for o in outputs]
    rows = []
    for pointer, enum in fields.items():
        vals = [_canonical(_at(v, pointer)) if ok else INVALID for ok, v in parsed]
        row = {
            "field": pointer or "/",
            "distinct": len(set(vals)),
            "entropy_bits": entropy_bits(vals),
            "values": dict(Counter(vals).most_common()),
        }
        if enum is not None:
            members = {_canonical(e) for e in enum}
            row["enum_size"] = len(members)
            row["used"] = len(members & set(vals))
            row["max_bits"] = math.log2(len(members)) if len(members) > 1 else 0.0
        rows.append(row)
    return rows


def diversity(gens: Sequence[GenerationGrid], schemas: dict[str, Any]) -> list[dict]:
    """One row per (schema, prompt, condition), in run order."""
    groups: dict[tuple[str, int, str], list[GenerationGrid]] = {}
    for g in gens:
        groups.setdefault((g.schema, g.prompt_index, g.condition), []).append(g)
    rows = []
    for (schema, pi, cond), sub in groups.items():
        outputs = [g.output for g in sub]
        rows.append(
            {
                "schema": schema,
                "prompt_index": pi,
                "condition": cond,
                "n": len(sub),
                "distinct_outputs": len(set(outputs)),
                "complete": sum(g.complete for g in sub),
                "fields": field_rows(outputs, schema_fields(schemas.get(schema, True))),
            }
        )
    return rows


def _validator(schema: Any):
    from jsonschema import validators

    cls = validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def free_verdict(text: str, validator) -> dict:
    """{"parsed", "fenced", "valid"} of one free-control output."""
    ok, value = parse_json(text)
    fenced = ok
    if not ok:
        m = FENCE.match(text.strip())
        if m:
            fenced, value = parse_json(m.group(1))
    return {"parsed": ok, "fenced": fenced, "valid": bool(fenced and validator.is_valid(value))}


def free_control(runs: Sequence, schemas: dict[str, Any]) -> list[dict]:
    """Per schema (run order) and "all": n, parsed, fenced, valid, and per-prompt diversity."""
    by: dict[str, list] = {}
    for r in runs:
        by.setdefault(r.schema, []).append(r)
    rows, totals = [], Counter()
    for schema, sub in by.items():
        v = _validator(schemas.get(schema, True))
        verdicts = [free_verdict(r.output, v) for r in sub]
        row = {"schema": schema, "n": len(sub)}
        for k in ("parsed", "fenced", "valid"):
            row[k] = sum(x[k] for x in verdicts)
        row["distinct_outputs"] = sum(
            len({r.output for r in sub if r.prompt_index == pi}) for pi in {r.prompt_index for r in sub}
        )
        rows.append(row)
        totals.update({k: row[k] for k in ("n", "parsed", "fenced", "valid", "distinct_outputs")})
    if rows:
        rows.append({"schema": "all", **{k: totals[k] for k in ("n", "parsed", "fenced", "valid", "distinct_outputs")}})
    return rows

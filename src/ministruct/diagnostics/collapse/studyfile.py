"""The study file: schemas x prompts, the grid, seeds and conditions, in TOML.

TOML because a study is written and read by people: comments beside the settings,
multi-line prompts without escapes, and the standard library reads it (tomllib). A
`.json` file with the same structure is read too. Paths are relative to the file.

    model = "path/to.gguf"            # optional; --model overrides
    seeds = 8                         # a count (0 .. N-1) or a list; --seeds overrides
    conditions = ["shown", "withheld"]  # a list: more conditions can join it
    max_tokens = 128
    chat = true                       # apply the model's chat template
    system = "..."                    # optional system message
    free_control = true               # the same prompts, schema shown, unconstrained
    p_valid_particles = 16            # P(valid) shown vs withheld with N particles (0: off)

    [reference]                       # the setting every generation is sampled at
    temperature = 0.7
    top_p = 0.9

    [grid]                            # every step is re-evaluated at each cell
    temperatures = [0.0, 0.3, 0.5, 0.7, 1.0, 1.5]
    top_ps = [0.5, 0.7, 0.8, 0.9, 0.95, 1.0]

    [[schemas]]
    name = "tight-enum"
    file = "tight_enum.json"          # or `schema = {...}` inline
    prompts = ["...", "..."]

A mistake is an InputError naming the file and the key (`schemas[2].prompts`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from ministruct.decode.sampling import MAX_PARTICLES
from ministruct.diagnostics.collapse.grid import CONDITIONS, DEFAULT_TEMPERATURES, DEFAULT_TOP_PS, REFERENCE
from ministruct.diagnostics.collapse.p_valid import DEFAULT_PARTICLES
from ministruct.errors import InputError

KEYS = {
    "model",
    "seeds",
    "conditions",
    "max_tokens",
    "chat",
    "system",
    "free_control",
    "p_valid_particles",
    "reference",
    "grid",
    "schemas",
}
SCHEMA_KEYS = {"name", "file", "schema", "prompts"}


@dataclass
class StudySchema:
    """One schema of a study, with its prompts."""

    name: str
    schema: Any
    prompts: list[str]
    file: str | None = None


@dataclass
class StudySpec:
    """A parsed study file (the values as given; StudySettings checks their ranges)."""

    path: str
    schemas: list[StudySchema]
    seeds: tuple[int, ...] = tuple(range(8))
    conditions: tuple[str, ...] = CONDITIONS
    temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    top_ps: tuple[float, ...] = DEFAULT_TOP_PS
    reference: tuple[float, float] = REFERENCE
    max_tokens: int = 128
    chat: bool = True
    system: str | None = None
    model: str | None = None
    free_control: bool = True
    p_valid_particles: int = DEFAULT_PARTICLES  # 0: no P(valid) runs
    extra: dict = field(default_factory=dict)


def _fail(path: str, where: str, message: str) -> InputError:
    return InputError(f"{path}: {where}: {message}")


def _typed(path: str, where: str, value: Any, kind: type | tuple, what: str) -> Any:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise _fail(path, where, f"must be {what}, not a boolean")
    if not isinstance(value, kind):
        raise _fail(path, where, f"must be {what}, not {type(value).__name__}")
    return value


def _numbers(path: str, where: str, value: Any) -> tuple[float, ...]:
    _typed(path, where, value, list, "a list of numbers")
    for i, x in enumerate(value):
        _typed(path, f"{where}[{i}]", x, (int, float), "a number")
    return tuple(float(x) for x in value)


def parse_seeds(path: str, value: Any) -> tuple[int, ...]:
    """`seeds`: a count N (0 .. N-1) or a list of integers >= 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise _fail(path, "seeds", f"the count must be >= 1, got {value}")
        return tuple(range(value))
    _typed(path, "seeds", value, list, "a count or a list of integers")
    for i, s in enumerate(value):
        _typed(path, f"seeds[{i}]", s, int, "an integer")
        if s < 0:
            raise _fail(path, f"seeds[{i}]", f"must be >= 0, got {s}")
    return tuple(value)


def load_study(path: str) -> StudySpec:
    """Read and check a study file (TOML, or JSON by its `.json` suffix)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise InputError.unreadable(path, "study", e) from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(raw.decode("utf-8"))
        else:
            data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: the study file is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno}, column {e.colno}: {e.msg}") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a study file holds a table (object) at the top")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise _fail(path, unknown[0], f"unknown key (known: {', '.join(sorted(KEYS))})")
    spec = StudySpec(path=str(p), schemas=[])
    if "seeds" in data:
        spec.seeds = parse_seeds(path, data["seeds"])
    if "conditions" in data:
        conds = _typed(path, "conditions", data["conditions"], list, "a list of condition names")
        for i, c in enumerate(conds):
            if c not in CONDITIONS:
                raise _fail(path, f"conditions[{i}]", f"must be one of {', '.join(CONDITIONS)}, got {c!r}")
        if not conds or len(set(conds)) != len(conds):
            raise _fail(path, "conditions", "name each condition once, at least one")
        spec.conditions = tuple(conds)
    for key, kind, what in (("max_tokens", int, "an integer"), ("chat", bool, "true or false")):
        if key in data:
            setattr(spec, key, _typed(path, key, data[key], kind, what))
    if spec.max_tokens < 1:
        raise _fail(path, "max_tokens", f"must be >= 1, got {spec.max_tokens}")
    if "free_control" in data:
        spec.free_control = _typed(path, "free_control", data["free_control"], bool, "true or false")
    if "p_valid_particles" in data:
        n = _typed(path, "p_valid_particles", data["p_valid_particles"], int, "an integer")
        if not 0 <= n <= MAX_PARTICLES:
            raise _fail(path, "p_valid_particles", f"must be in [0, {MAX_PARTICLES}] (0: off), got {n}")
        spec.p_valid_particles = n
    for key in ("system", "model"):
        if key in data:
            v = _typed(path, key, data[key], str, "a string")
            setattr(spec, key, v or None)
    if spec.model is not None and not Path(spec.model).is_absolute():
        spec.model = str(p.parent / spec.model)
    if "reference" in data:
        ref = _typed(path, "reference", data["reference"], dict, "a table with temperature and top_p")
        extra = sorted(set(ref) - {"temperature", "top_p"})
        if extra:
            raise _fail(path, f"reference.{extra[0]}", "unknown key (known: temperature, top_p)")
        t = _typed(path, "reference.temperature", ref.get("temperature", REFERENCE[0]), (int, float), "a number")
        tp = _typed(path, "reference.top_p", ref.get("top_p", REFERENCE[1]), (int, float), "a number")
        spec.reference = (float(t), float(tp))
    if "grid" in data:
        grid = _typed(path, "grid", data["grid"], dict, "a table with temperatures and top_ps")
        extra = sorted(set(grid) - {"temperatures", "top_ps"})
        if extra:
            raise _fail(path, f"grid.{extra[0]}", "unknown key (known: temperatures, top_ps)")
        if "temperatures" in grid:
            spec.temperatures = _numbers(path, "grid.temperatures", grid["temperatures"])
        if "top_ps" in grid:
            spec.top_ps = _numbers(path, "grid.top_ps", grid["top_ps"])
    schemas = _typed(path, "schemas", data.get("schemas"), list, "a list of [[schemas]] tables")
    if not schemas:
        raise _fail(path, "schemas", "name at least one schema")
    names: set[str] = set()
    for i, s in enumerate(schemas):
        spec.schemas.append(_schema(path, p.parent, i, s, names))
    return spec


def _schema(path: str, folder: Path, i: int, s: Any, names: set[str]) -> StudySchema:
    where = f"schemas[{i}]"
    _typed(path, where, s, dict, "a table")
    unknown = sorted(set(s) - SCHEMA_KEYS)
    if unknown:
        raise _fail(path, f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(SCHEMA_KEYS))})")
    name = _typed(path, f"{where}.name", s.get("name"), str, "a string")
    if not name or name in names:
        raise _fail(path, f"{where}.name", f"each schema needs its own non-empty name, got {name!r}")
    names.add(name)
    if ("file" in s) == ("schema" in s):
        raise _fail(path, where, "give `file` or `schema`, one of them")
    file = None
    if "file" in s:
        file = str(folder / _typed(path, f"{where}.file", s["file"], str, "a path"))
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise _fail(path, f"{where}.file", f"cannot read {file}: {getattr(e, 'strerror', None) or e}") from None
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{file}: line {e.lineno}, column {e.colno}: {e.msg}") from None
    else:
        schema = s["schema"]
    prompts = _typed(path, f"{where}.prompts", s.get("prompts"), list, "a list of strings")
    if not prompts:
        raise _fail(path, f"{where}.prompts", "give at least one prompt")
    for j, pr in enumerate(prompts):
        if not isinstance(pr, str) or not pr.strip():
            raise _fail(path, f"{where}.prompts[{j}]", "must be a non-empty string")
    return StudySchema(name, schema, list(prompts), file)

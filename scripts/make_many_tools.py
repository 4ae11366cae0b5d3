"""Write samples/tools/many_200.json: 200 tools in OpenAI's shape, for the compile and mask
benchmarks (benchmarks/masks.py). Deterministic: names share prefixes in families
(`get_weather`, `get_weather_1`, `get_weather_forecast`...), parameters mix strings with
lengths, formats and enums, bounded integers, numbers, booleans, arrays and a nested object."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

VERBS = ["get", "set", "list", "create", "delete", "update", "search", "send", "find", "book"]
NOUNS = ["weather", "event", "email", "file", "user", "order", "flight", "note", "task", "invoice"]


def parameters(rng: random.Random, i: int) -> dict:
    props: dict = {}
    kinds = rng.sample(["str", "enum", "int", "num", "bool", "date", "arr", "obj", "email"], k=rng.randint(1, 5))
    for k in kinds:
        name = f"{k}_{i % 7}"
        if k == "str":
            props[name] = {"type": "string", "minLength": 1, "maxLength": rng.choice([20, 40, 80])}
        elif k == "enum":
            props[name] = {"type": "string", "enum": [f"v{j}" for j in range(rng.randint(2, 6))]}
        elif k == "int":
            lo = rng.randint(0, 10)
            props[name] = {"type": "integer", "minimum": lo, "maximum": lo + rng.choice([9, 99, 999])}
        elif k == "num":
            props[name] = {"type": "number"}
        elif k == "bool":
            props[name] = {"type": "boolean"}
        elif k == "date":
            props[name] = {"type": "string", "format": "date"}
        elif k == "email":
            props[name] = {"type": "string", "format": "email"}
        elif k == "arr":
            props[name] = {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 5}
        else:
            props[name] = {
                "type": "object",
                "properties": {"id": {"type": "integer", "minimum": 0}, "label": {"type": "string", "maxLength": 30}},
                "required": ["id"],
                "additionalProperties": False,
            }
    required = sorted(rng.sample(sorted(props), k=rng.randint(1, len(props))))
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def many_tools(n: int = 200, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        base = f"{VERBS[i % len(VERBS)]}_{NOUNS[(i // len(VERBS)) % len(NOUNS)]}"
        name = base if i < 100 else f"{base}_{i // 100}"  # the second hundred extends the first's names
        desc = f"{name.replace('_', ' ')} (tool {i})"
        out.append(
            {"type": "function", "function": {"name": name, "description": desc, "parameters": parameters(rng, i)}}
        )
    return out


if __name__ == "__main__":
    path = Path(
        sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "samples/tools/many_200.json"
    )
    path.write_text(json.dumps(many_tools(), indent=1) + "\n")
    print(path)

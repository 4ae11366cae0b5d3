"""JSON Schema coverage tables: JSON-Schema-Test-Suite (draft 2020-12 core) per keyword
file, and JSONSchemaBench per subset (compile rate, valid accepted, invalid accepted),
with llguidance's compile rate side by side when it is installed.

    .venv/bin/python benchmarks/schema_coverage.py [jsts|bench|refusals|all] [--every N]

`refusals` compiles every JSONSchemaBench schema with the library's defaults (in process)
and tables the refusals by keyword, with the slowest compiles.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema import canonical_order, schema_to_grammar

SUITES = Path(__file__).resolve().parents[1] / ".." / "shared" / "suites"


def jsts_rows(whitespace: str = "flexible") -> list[dict]:
    """One row per core draft2020-12 file: cases, compiled, tests checked, agreed, FA, FR
    (the suite's remote documents given for http://localhost:1234/, as a local mapping)."""
    docs = {"http://localhost:1234/": str(SUITES / "jsts" / "remotes")}
    rows = []
    for f in sorted((SUITES / "jsts" / "draft2020-12").glob("*.json")):
        row = {
            "file": f.stem,
            "cases": 0,
            "compiled": 0,
            "tests": 0,
            "agreed": 0,
            "false_accepts": [],
            "false_rejects": [],
            "errors": [],
        }
        for case in json.loads(f.read_text()):
            row["cases"] += 1
            try:
                g = schema_to_grammar(case["schema"], whitespace=whitespace, extra_properties="spec", documents=docs)
            except SchemaError:
                continue
            except Exception as e:  # noqa: BLE001 - reported, a test asserts none
                row["errors"].append(f"{case['description']}: {type(e).__name__}: {e}")
                continue
            row["compiled"] += 1
            for t in case["tests"]:
                text = json.dumps(canonical_order(t["data"], case["schema"], docs))
                got = accepts(g, text)
                row["tests"] += 1
                if got == t["valid"]:
                    row["agreed"] += 1
                elif got:
                    row["false_accepts"].append(f"{case['description']} / {t['description']}")
                else:
                    row["false_rejects"].append(f"{case['description']} / {t['description']}")
        rows.append(row)
    return rows


def bench_files(every: int = 1) -> list[Path]:
    return sorted((SUITES / "jsonschemabench").glob("*.json"))[::every]


def subset_of(path: Path) -> str:
    name = path.stem
    if "---" in name:
        return name.split("---")[0]
    return name.rsplit("_", 1)[0] if name.startswith(("BFCL", "JME")) else name


def llguidance_compiles(schema) -> bool | None:
    try:
        import llguidance
    except ImportError:
        return None
    try:
        grm = llguidance.LLMatcher.grammar_from_json_schema(schema)
        res = llguidance.LLMatcher.validate_grammar(grm)  # error text, "" when the grammar is fine
        return bool(res[0]) if isinstance(res, tuple) else res == ""
    except Exception:  # noqa: BLE001
        return False


def bench_rows(every: int = 1, whitespace: str = "flexible", with_llg: bool = True) -> dict[str, dict]:
    """Per subset: schemas, compiled, valid (accepted), invalid (accepted), errors, llg compiled."""
    stats: dict[str, dict] = defaultdict(
        lambda: {
            "schemas": 0,
            "compiled": 0,
            "valid": 0,
            "valid_ok": 0,
            "invalid": 0,
            "invalid_acc": [],
            "errors": [],
            "llg": 0,
            "ms": 0.0,
        }
    )
    for f in bench_files(every):
        d = json.loads(f.read_text())
        s = stats[subset_of(f)]
        s["schemas"] += 1
        if with_llg:
            r = llguidance_compiles(d["schema"])
            s["llg"] = None if r is None else s["llg"] + int(r)
        t0 = time.perf_counter()
        try:
            g = schema_to_grammar(d["schema"], whitespace=whitespace, extra_properties="spec")
        except SchemaError:
            continue
        except Exception as e:  # noqa: BLE001
            s["errors"].append(f"{f.name}: {type(e).__name__}: {e}")
            continue
        finally:
            s["ms"] += (time.perf_counter() - t0) * 1000
        s["compiled"] += 1
        for t in d.get("tests", []):
            text = json.dumps(canonical_order(t["data"], d["schema"]))
            try:
                got = accepts(g, text)
            except Exception as e:  # noqa: BLE001
                s["errors"].append(f"{f.name}: accepts: {type(e).__name__}: {e}")
                continue
            if t["valid"]:
                s["valid"] += 1
                s["valid_ok"] += int(got)
            else:
                s["invalid"] += 1
                if got:
                    s["invalid_acc"].append(f.name)
    return dict(stats)


def jsts_registry():
    """The suite's remote schemas, under the http://localhost:1234/ base its $refs use."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    remotes = SUITES / "jsts" / "remotes"
    resources = []
    for f in remotes.rglob("*.json"):
        uri = "http://localhost:1234/" + f.relative_to(remotes).as_posix()
        resources.append((uri, Resource.from_contents(json.loads(f.read_text()), default_specification=DRAFT202012)))
    return Registry().with_resources(resources)


def check_rows(every: int = 1) -> dict[str, dict]:
    """`check --schema` (InstanceChecker, instances as written, any key order): per source,
    schemas, checked, valid accepted, invalid accepted (false accepts), errors."""
    from ministruct.check.instance import InstanceChecker

    rows: dict[str, dict] = defaultdict(
        lambda: {"schemas": 0, "checked": 0, "valid": 0, "valid_ok": 0, "invalid": 0, "false_accepts": [], "refused": 0}
    )

    def run(label: str, schema, tests, name: str, registry=None, format_assertion: bool = True) -> None:
        r = rows[label]
        r["schemas"] += 1
        try:
            checker = InstanceChecker(schema, source=name, registry=registry, format_assertion=format_assertion)
            verdicts = [(t, checker.check(json.dumps(t["data"]))) for t in tests]
        except SchemaError:
            r["refused"] += 1
            return
        r["checked"] += 1
        for t, v in verdicts:
            if t["valid"]:
                r["valid"] += 1
                r["valid_ok"] += int(v.accepted)
            else:
                r["invalid"] += 1
                if v.accepted:
                    r["false_accepts"].append(f"{name}: {t.get('description', '')}")

    registry = jsts_registry()
    for f in sorted((SUITES / "jsts" / "draft2020-12").glob("*.json")):
        for case in json.loads(f.read_text()):
            # format.json tests Draft 2020-12's default, format as an annotation: run it that way
            # (ministruct asserts formats by default; its own table row shows the difference)
            name = f"{f.stem}/{case['description']}"
            run("JSTS draft2020-12", case["schema"], case["tests"], name, registry, f.stem != "format")
            if f.stem == "format":
                run("JSTS format, asserted", case["schema"], case["tests"], name, registry)
    for f in bench_files(every):
        d = json.loads(f.read_text())
        run("JSONSchemaBench", d["schema"], d.get("tests", []), f.name)
    return dict(rows)


def refusal_rows(every: int = 1, limit_s: int = 60) -> tuple[int, int, Counter, list]:
    """(schemas, compiled, refusals by keyword, (wall seconds, CPU seconds, file) of the
    slowest) with the library's defaults; a compile past `limit_s` seconds counts as a
    refusal "(time)". (CPU time beside wall time: on a shared machine it is the steadier.)"""
    import signal

    def stop(*_):
        raise TimeoutError

    signal.signal(signal.SIGALRM, stop)
    compiled, refused, times = 0, Counter(), []
    files = bench_files(every)
    for f in files:
        schema = json.loads(f.read_text())["schema"]
        t0, c0 = time.perf_counter(), time.process_time()
        signal.alarm(limit_s)
        try:
            schema_to_grammar(schema)
            compiled += 1
        except SchemaError as e:
            refused[e.keyword or "(other)"] += 1
        except TimeoutError:
            refused["(time)"] += 1
        finally:
            signal.alarm(0)
        times.append((time.perf_counter() - t0, time.process_time() - c0, f.name))
    return len(files), compiled, refused, sorted(times, reverse=True)[:5]


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f}%" if b else "   - "


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("which", nargs="?", default="all", choices=["jsts", "bench", "check", "refusals", "all"])
    ap.add_argument("--every", type=int, default=1, help="use every Nth JSONSchemaBench schema")
    args = ap.parse_args()
    if args.which in ("check", "all"):
        print(
            f"{'check --schema':20} {'schemas':>7} {'checked':>7} {'valid':>6} {'accepted':>9} {'invalid':>7} {'FA':>4}"
        )
        for label, r in check_rows(args.every).items():
            print(
                f"{label:20} {r['schemas']:7} {r['checked']:7} {r['valid']:6} "
                f"{_pct(r['valid_ok'], r['valid']):>9} {r['invalid']:7} {len(r['false_accepts']):4}"
            )
            for x in r["false_accepts"][:20]:
                print("    !!", x)
    if args.which in ("refusals", "all"):
        n, ok, refused, slow = refusal_rows(args.every)
        print(f"JSONSchemaBench, library defaults: {ok}/{n} compiled ({_pct(ok, n).strip()})")
        print(f"{'refused by keyword':24} {'schemas':>7}")
        for k, c in refused.most_common():
            print(f"{k:24} {c:7}")
        print("slowest:", ", ".join(f"{f} {t:.1f} s ({cpu:.1f} s CPU)" for t, cpu, f in slow))
    if args.which in ("jsts", "all"):
        rows = jsts_rows()
        print(
            f"{'JSTS draft2020-12 file':26} {'cases':>5} {'compiled':>8} {'tests':>5} {'agreed':>6} {'FA':>3} {'FR':>3}"
        )
        tot = defaultdict(int)
        for r in rows:
            print(
                f"{r['file']:26} {r['cases']:5} {r['compiled']:8} {r['tests']:5} {r['agreed']:6} {len(r['false_accepts']):3} {len(r['false_rejects']):3}"
            )
            for k in ("cases", "compiled", "tests", "agreed"):
                tot[k] += r[k]
            tot["fa"] += len(r["false_accepts"])
            tot["fr"] += len(r["false_rejects"])
            for x in r["false_accepts"] + r["errors"]:
                print("    !!", x)
        print(
            f"{'TOTAL':26} {tot['cases']:5} {tot['compiled']:8} {tot['tests']:5} {tot['agreed']:6} {tot['fa']:3} {tot['fr']:3}"
        )
    if args.which in ("bench", "all"):
        t0 = time.time()
        st = bench_rows(args.every)
        print(
            f"\n{'JSONSchemaBench subset':22} {'schemas':>7} {'compiled':>8} {'valid acc':>9} {'invalid acc':>11} {'llg comp':>8} {'ms/schema':>9}"
        )
        tot = defaultdict(int)
        for name in sorted(st):
            s = st[name]
            llg = "n/a" if s["llg"] is None else _pct(s["llg"], s["schemas"])
            print(
                f"{name:22} {s['schemas']:7} {_pct(s['compiled'], s['schemas']):>8} {_pct(s['valid_ok'], s['valid']):>9} "
                f"{len(s['invalid_acc']):5}/{s['invalid']:<5} {llg:>8} {s['ms'] / max(s['schemas'], 1):9.1f}"
            )
            for k in ("schemas", "compiled", "valid", "valid_ok", "invalid"):
                tot[k] += s[k]
            tot["ia"] += len(s["invalid_acc"])
            for x in s["errors"][:5]:
                print("    !!", x)
        print(
            f"{'TOTAL':22} {tot['schemas']:7} {_pct(tot['compiled'], tot['schemas']):>8} {_pct(tot['valid_ok'], tot['valid']):>9} "
            f"{tot['ia']:5}/{tot['invalid']:<5}   ({time.time() - t0:.0f} s)"
        )


if __name__ == "__main__":
    sys.exit(main())

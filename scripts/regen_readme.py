"""Run every README example that shows its output, on the bundled model, and write what
the commands print today into README.md (with --check: say where README differs, exit 1).

Each shown output sits between `<!-- readme: NAME -->` and `<!-- /readme -->`; the
recipes below run its commands as a user does (`ministruct` on PATH, from the
repository root, a terminal 100 columns wide) and render the block: whole outputs as
printed; long ones abridged the same way each time (table rows picked by what the
prose discusses, the timing column left out; record fields picked, numbers rounded);
and the prose that reads numbers off them (the `inspect` walkthrough, the tool shares)
written from the same run. A change of defaults is taken in by running this again.

    python scripts/regen_readme.py            # rewrite README.md
    python scripts/regen_readme.py --check    # exit 1 where README.md differs
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BLOCK = re.compile(r"(<!-- readme: ([\w-]+) -->\n)(.*?)(<!-- /readme -->)", re.DOTALL)
INDENT = "    "

CONJ = "Conjugate 'comer', 3rd person, future"
CONJ_WANT = {"verb": "comer", "tense": "futuro", "person": "3rd"}  # what the prompt asks for


class Runner:
    """Runs shell command lines with `ministruct` on PATH (this interpreter's module)."""

    def __init__(self) -> None:
        self._bin = tempfile.mkdtemp(prefix="ministruct-readme-")
        wrapper = Path(self._bin) / "ministruct"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ministruct "$@"\n')
        wrapper.chmod(0o755)
        src = str(REPO / "src")
        self.env = {
            **os.environ,
            "PATH": self._bin + os.pathsep + os.environ.get("PATH", ""),
            "PYTHONPATH": src + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
            "COLUMNS": "100",
        }
        for k in ("MINISTRUCT_MODEL", "MINISTRUCT_DEBUG", "MINISTRUCT_SERVERS"):
            self.env.pop(k, None)

    def __call__(self, line: str) -> str:
        """stdout of `line` (a shell command line), run from the repository root."""
        done = subprocess.run(["bash", "-c", line], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=900)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"{line}: exit {done.returncode}\n{done.stderr}")
        return done.stdout


def _shown(*pairs: tuple[str, str]) -> str:
    """An indented block of `$ command` lines, each followed by its output."""
    out = []
    for cmd, text in pairs:
        if cmd:
            out.append(f"$ {cmd}")
        out.extend(text.rstrip("\n").splitlines())
    return "".join(f"{INDENT}{line}".rstrip() + "\n" for line in out)


# ---------------------------------------------------------------- recipes


def capital(run: Runner) -> dict[str, str]:
    cmd = 'ministruct gen --schema samples/capital.json "What is the capital of France?"'
    return {"capital": _shown(("", run(cmd)))}


def conj(run: Runner) -> dict[str, str]:
    """gen and inspect on the conjugation prompt; the walkthrough reads the inspect run."""
    gen = f'ministruct gen --schema samples/conj.json "{CONJ}" --temperature 0'
    ins = f'ministruct inspect --schema samples/conj.json "{CONJ}" --temperature 0'
    output = run(gen)
    table = run(ins + " --no-progress")
    data = json.loads(run(ins + " --no-progress --json"))
    steps = data["steps"]
    value = json.loads(data["result"]["output"])
    person = _step_at(steps, data["result"]["output"], _value_offset(data["result"]["output"], "person"))
    last = steps[-1]
    rows = _table_rows(table, [person["step"], last["step"]])
    block = _shown((gen, output), (ins, rows))
    return {"conj": block, "conj-prose": _conj_prose(value, person, last)}


def _value_offset(text: str, key: str) -> int:
    """The offset of the first character of `key`'s string value in the JSON `text`."""
    m = re.search(re.escape(f'"{key}"') + r'\s*:\s*"', text)
    assert m is not None, (key, text)
    return m.end()


def _step_at(steps: list[dict], output: str, offset: int) -> dict:
    """The step whose token writes the character at `offset` of the output."""
    at = 0
    for s in steps:
        at += len(s["token"])
        if at > offset:
            return s
    raise AssertionError(f"no step writes offset {offset} of {output!r}")


def _table_rows(table: str, wanted: list[int]) -> str:
    """The table's column header and the rows of the `wanted` steps, `...` between them,
    without the mask-time column (a timing: it differs from run to run)."""
    lines = table.splitlines()
    head = next(i for i, line in enumerate(lines) if re.match(r"\s*#\s+token\s", line))
    cut = lines[head].index("mask µs")
    out = [lines[head][:cut].rstrip()]
    by_step = {}
    for line in lines[head + 1 :]:
        m = re.match(r"\s*(\d+)\s", line)
        if m:
            by_step[int(m.group(1))] = line[:cut].rstrip()
    for n in wanted:
        out += ["  ...", by_step[n]]
    return "\n".join(out)


def _conj_prose(value: dict, person: dict, last: dict) -> str:
    right = [k for k, v in CONJ_WANT.items() if value.get(k) == v]
    wrong = [k for k, v in CONJ_WANT.items() if value.get(k) != v]
    names = {"verb": "Verb", "tense": "tense", "person": "the person"}

    def listed(keys: list[str]) -> str:
        words = [names[k] for k in keys]
        words[0] = words[0][0].upper() + words[0][1:]
        return " and ".join(words)

    parts = []
    if right and wrong:
        parts.append(f"{listed(right)} {'are' if len(right) > 1 else 'is'} right; {names[wrong[0]]} is not")
    elif wrong:
        parts.append(f"{listed(wrong)} {'are' if len(wrong) > 1 else 'is'} wrong")
    else:
        parts.append(f"{listed(right)} are right")
    z = person["Z"]
    text = (
        f"{'. '.join(parts)}. At step {person['step']}, the one that picks the person, only "
        f"{z:.0%} of the model's own probability was on a legal token (Z = {z:.2f}: the rest "
        f'went to tokens that cannot begin "1st", "2nd" or "3rd"), and of what was left '
        f'"{person["token"]}" came first.'
    )
    if last["Z"] < 0.5:
        text += (
            f" Step {last['step']} ends the output where the model wanted to go on (Z = {last['Z']:.2f}: "
            f"the legal `{last['token']}` got {last['Z']:.0%} of its mass)."
        )
    text += " More to try:"
    return _wrap(text)


def more(run: Runner) -> dict[str, str]:
    year = "ministruct gen --regex '[0-9]{4}' 'Pick a year between 1900 and 2000:' --n 5 --seed 1"
    check = "ministruct check --regex '[0-9]{4}' 19845; echo \"exit $?\""
    return {"more": _shown((year, run(year)), (check, run(check)))}


def think_and_tools(run: Runner) -> dict[str, str]:
    think = (
        "ministruct gen --schema samples/capital.json --think --think-tokens 24 "
        '"What is the capital of France?" --format json'
    )
    tools = (
        "ministruct gen --tools samples/tools/everyday.json --tool-choice required "
        '"What\'s the weather in Paris right now?" --format json'
    )
    t = json.loads(run(think))
    reasoning = t["reasoning"][:56]
    reasoning = reasoning[: reasoning.rfind(" ")] + " ..." if len(t["reasoning"]) > 56 else reasoning
    shown_think = (
        f'{{"v": 1, "id": 1, ..., "reasoning": {json.dumps(reasoning)}, "output": {json.dumps(t["output"])}, ..., '
        f'"think_end": {json.dumps(t["think_end"])}, "think_tokens": {t["think_tokens"]}}}'
    )
    c = json.loads(run(tools))
    (call,) = c["tool_calls"]
    (score,) = c["tool_scores"]
    ranked = sorted(score["scores"], key=lambda s: -s["share"])[:3]
    shown = [s for s in score["scores"] if s in ranked]

    def one(s: dict, full: bool) -> str:
        tail = f', "share": {s["share"]:.3f}}}' if full else ", ...}"
        return f'{{"name": "{s["name"]}", "p": {s["p"]:.3f}{tail}'

    scores = [one(s, i < 2) for i, s in enumerate(shown)]
    shown_tools = (
        f'{{..., "tool_calls": [{{"id": "call_...", "type": "function", "function": '
        f'{{"name": "{call["function"]["name"]}", ...}}}}],\n'
        f' "tool_scores": [{{"step": {score["step"]}, "chosen": "{score["chosen"]}", "scores": [{scores[0]},\n'
        f"   {', '.join(scores[1:])}, ...]}}], ...}}"
    )
    block = _shown((think, shown_think), (tools, shown_tools))
    return {"think-tools": block, "tools-prose": _tools_prose(score)}


FRUIT = (
    'ministruct gen --choice "The potato" --choice "An apple" --choice banana '
    '--temperature 1 --top-p 1 "Which is a fruit?" --n 200'
)


def particles(run: Runner) -> dict[str, str]:
    masked = FRUIT + " | sort | uniq -c"
    weighed = FRUIT + " --particles 16 | sort | uniq -c"
    m, w = run(masked), run(weighed)
    block = _shown((masked, m), (weighed, w))

    def counts(text: str) -> dict[str, int]:
        return {line.split(None, 1)[1]: int(line.split(None, 1)[0]) for line in text.strip().splitlines()}

    mc, wc = counts(m), counts(w)
    top_m = max(mc, key=lambda k: mc[k])
    top_w = max(wc, key=lambda k: wc[k])
    text = (
        f"Valid is not the same as what the model would have said: under the mask the bundled model "
        f"answers `{top_m}` {mc[top_m] / 200:.0%} of the time and `{top_w}` {mc.get(top_w, 0) / 200:.0%} "
        f'(it likes to begin with "The"), while `--particles 16` samples what the model would have said '
        f"given a valid answer (here exactly, every option scored under the model, the language being small): "
        f"`{top_w}` {wc[top_w] / 200:.0%}. Each record then carries `p_valid`, the chance the model writes a "
        f"valid answer unconstrained ([docs/sampling.md](docs/sampling.md))."
    )
    return {"particles": block, "particles-prose": _wrap(text)}


def _tools_prose(score: dict) -> str:
    by = {s["name"]: s["share"] for s in score["scores"]}
    top = max(by, key=lambda k: by[k])
    better = "get_weather"  # "right now": the current weather, not a forecast
    if top == better:
        text = (
            f"Of the mass the model put on a tool name, {by[top]:.0%} went to `{better}`, the right "
            "tool here: `tool_scores` says which tool it wanted, and how sure it was."
        )
    else:
        text = (
            f"Of the mass the model put on a tool name, {by[top]:.0%} went to `{top}` and "
            f"{by[better]:.0%} to `{better}`, the better answer here: `tool_scores` says which tool "
            "it wanted, and how sure it was."
        )
    return _wrap(text)


def _wrap(text: str, width: int = 90) -> str:
    """Prose wrapped as README's paragraphs are."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines) + "\n"


RECIPES: list[Callable[[Runner], dict[str, str]]] = [capital, conj, more, think_and_tools, particles]


# ---------------------------------------------------------------- README


def blocks(text: str) -> dict[str, str]:
    """README's generated blocks by name."""
    return {m.group(2): m.group(3) for m in BLOCK.finditer(text)}


def generate() -> dict[str, str]:
    """Every block, from what the commands print now."""
    run = Runner()
    out: dict[str, str] = {}
    for recipe in RECIPES:
        out.update(recipe(run))
    return out


def rewrite(text: str, new: dict[str, str]) -> str:
    missing = set(new) - set(blocks(text))
    if missing:
        raise SystemExit(f"README.md has no block named {sorted(missing)}")
    return BLOCK.sub(lambda m: m.group(1) + new.get(m.group(2), m.group(3)) + m.group(4), text)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    text = README.read_text(encoding="utf-8")
    new = rewrite(text, generate())
    if new == text:
        return 0
    if check:
        old_blocks, new_blocks = blocks(text), blocks(new)
        for name in new_blocks:
            if old_blocks.get(name) != new_blocks[name]:
                print(f"README.md block {name!r} differs from what the commands print:\n{new_blocks[name]}")
        return 1
    README.write_text(new, encoding="utf-8")
    print("README.md rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

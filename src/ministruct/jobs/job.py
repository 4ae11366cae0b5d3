"""A generation job: prompt text, compiled constraint, decode, result record.

What `ministruct gen` does for each prompt, as a library call:

    job = GenerationJob(Model.load(), load_constraint(regex="[0-9]{4}"), SamplingParams(seed=1))
    result = job.run("Pick a year:")
    print(result.output)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ministruct.decode.loop import Decoder, Generation, Step
from ministruct.decode.model import Model
from ministruct.decode.sampling import SamplingParams
from ministruct.engine.compile import CompiledGrammar, compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.fight_warnings import FightMonitor

SCHEMA_INSTRUCTION = "Answer with JSON that matches this JSON Schema:"


@dataclass
class GenResult:
    """One generation's outcome, as the `gen` result record of cli.md."""

    id: Any
    prompt: str
    output: str
    complete: bool
    stop_reason: str | None  # None for an error record (the input could not be run)
    n_tokens: int
    json_value: Any = None
    has_json: bool = False
    error: str | None = None
    budget_limited: bool = False
    warnings: list[str] = field(default_factory=list)
    generation: Generation | None = field(default=None, repr=False)

    def to_record(self) -> dict:
        rec: dict[str, Any] = {"id": self.id, "prompt": self.prompt, "output": self.output}
        if self.has_json:
            rec["json"] = self.json_value
        rec.update(
            complete=self.complete,
            stop_reason=self.stop_reason,
            n_tokens=self.n_tokens,
            error=self.error,
            budget_limited=self.budget_limited,
            warnings=list(self.warnings),
        )
        return rec

    @classmethod
    def failed(cls, rid: Any, prompt: str | None, error: str) -> "GenResult":
        """The record for an input that could not be run (it keeps its place in the batch)."""
        return cls(rid, prompt, "", False, None, 0, error=error)


def user_message(prompt: str, constraint: Constraint | None, *, show_schema: bool = True) -> str:
    """The user message for `prompt`: with a schema constraint shown, the schema text appended
    (the same text whether the model runs here or on a server)."""
    if constraint is not None and constraint.kind == "schema" and show_schema:
        return f"{prompt}\n\n{SCHEMA_INSTRUCTION}\n{json.dumps(constraint.schema, ensure_ascii=False)}"
    return prompt


class GenerationJob:
    """A model, one constraint and sampling settings, reused across prompts."""

    def __init__(
        self,
        model: Model,
        constraint: Constraint | None,
        params: SamplingParams,
        *,
        max_tokens: int = 256,
        chat: bool = True,
        system: str | None = None,
        show_schema: bool = True,
        budget_aware: bool = True,
        fast_forward: bool = True,
    ) -> None:
        self.model = model
        self.constraint = constraint
        self.params = params
        self.max_tokens = max_tokens
        self.chat = chat
        self.system = system
        self.show_schema = show_schema
        self.budget_aware = budget_aware
        self.fast_forward = fast_forward
        self._compiled: CompiledGrammar | None = None

    @property
    def compiled(self) -> CompiledGrammar | None:
        if self._compiled is None and self.constraint is not None:
            self._compiled = compile_grammar(self.constraint.grammar, self.model.vocabulary)
        return self._compiled

    def user_message(self, prompt: str) -> str:
        """The prompt, with the schema text appended when it is shown."""
        return user_message(prompt, self.constraint, show_schema=self.show_schema)

    def prompt_tokens(self, prompt: str) -> list[int]:
        return self.model.encode_prompt(self.user_message(prompt), chat=self.chat, system=self.system)

    def decoder(self, prompt: str, *, seed: int | None = None) -> Decoder:
        """A Decoder for one prompt (iterate it for Steps)."""
        params = self.params if seed is None else _with_seed(self.params, seed)
        compiled = self.compiled
        matcher = Matcher(compiled) if compiled is not None else None
        return Decoder(
            self.model,
            self.prompt_tokens(prompt),
            matcher,
            params,
            max_tokens=self.max_tokens,
            budget_aware=self.budget_aware,
            fast_forward=self.fast_forward,
        )

    def run(
        self, prompt: str, *, rid: Any = 1, seed: int | None = None, on_step: Callable[[Step], None] | None = None
    ) -> GenResult:
        """Generate for one prompt and return its result record."""
        dec = self.decoder(prompt, seed=seed)
        monitor = FightMonitor()
        for step in dec.steps():
            monitor.observe(step)
            if on_step is not None:
                on_step(step)
        return self.result_of(dec.result, rid, prompt, monitor)

    def result_of(self, gen: Generation, rid: Any, prompt: str, monitor: FightMonitor | None = None) -> GenResult:
        """The result record of a finished generation (with the fight warnings when a
        monitor watched its steps)."""
        res = GenResult(
            id=rid,
            prompt=prompt,
            output=gen.text,
            complete=gen.complete,
            stop_reason=gen.stop_reason,
            n_tokens=gen.n_tokens,
            error=str(gen.error) if gen.error is not None else None,
            budget_limited=gen.budget_limited,
            warnings=monitor.warnings(gen.output) if monitor is not None else [],
            generation=gen,
        )
        if self.constraint is not None and self.constraint.kind == "schema":
            res.has_json = True
            if gen.complete:
                try:
                    res.json_value = json.loads(gen.text)
                except ValueError:
                    res.json_value = None
        return res

    def persist(self) -> None:
        """Save the compiled grammar's learned masks to the disk cache."""
        if self._compiled is not None:
            self._compiled.persist()


def _with_seed(params: SamplingParams, seed: int) -> SamplingParams:
    from dataclasses import replace

    return replace(params, seed=seed)

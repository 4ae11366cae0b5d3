"""A generation job: prompt text, compiled constraint, decode, result record.

What `ministruct gen` does for each prompt, as a library call:

    job = GenerationJob(Model.load(), load_constraint(regex="[0-9]{4}"), SamplingParams(seed=1))
    result = job.run("Pick a year:")
    print(result.output)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from ministruct.decode.batched import BatchedDecoder, Request
from ministruct.decode.defaults import DEFAULT_PARALLEL, checked_max_tokens
from ministruct.decode.loop import Decoder, Generation, Step
from ministruct.decode.model import Model
from ministruct.decode.particles import ParticleContexts, ParticleDecoder
from ministruct.decode.sampling import SamplingParams
from ministruct.engine.compile import CompiledGrammar, compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import InputError, MinistructError, UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.tools import ToolSpec, read_calls, tools_instruction
from ministruct.jobs.fight_warnings import FightMonitor, prompt_remedy
from ministruct.jobs.ordered import InOrder
from ministruct.jobs.records import json_text, surrogate_error
from ministruct.jobs.think import ThinkSettings, announce, split_output, think_constraint
from ministruct.jobs.tool_scores import ToolScorer

SCHEMA_INSTRUCTION = "Answer with JSON that matches this JSON Schema:"
_MISSING: Any = object()  # run_many's seeds ran out


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
    reasoning: str | None = None  # with think first: the thinking (output holds the answer alone)
    think_end: str | None = None  # "closed" (the model wrote CLOSE), "budget", None (it never ended)
    think_tokens: int | None = None  # tokens spent thinking, CLOSE included (None: not counted, on a server)
    has_tools: bool = False
    content: str | None = None  # with tools: the free text before the calls (None: none)
    tool_calls: list[dict] = field(default_factory=list)  # OpenAI's shape
    tool_scores: list[dict] = field(default_factory=list)  # per call (jobs/tool_scores.py)
    particles: dict | None = None  # with particles: p_valid, log_weight, ess_min, resamples, particle_method
    # lenient schemas whose grammar left keywords out: what `check`'s validator says of the
    # output against the full schema (GenerationJob.schema_check)
    schema_check: dict | None = None

    def to_record(self) -> dict:
        rec: dict[str, Any] = {"id": self.id, "prompt": self.prompt}
        if self.reasoning is not None:
            rec["reasoning"] = self.reasoning
        rec["output"] = self.output
        if self.has_json:
            rec["json"] = self.json_value
        if self.has_tools:
            rec.update(content=self.content, tool_calls=self.tool_calls, tool_scores=self.tool_scores)
        rec.update(
            complete=self.complete,
            stop_reason=self.stop_reason,
            n_tokens=self.n_tokens,
            error=self.error,
            budget_limited=self.budget_limited,
            warnings=list(self.warnings),
        )
        if self.reasoning is not None:
            rec.update(think_end=self.think_end, think_tokens=self.think_tokens)
        if self.particles is not None:
            rec.update(self.particles)
        if self.schema_check is not None:
            rec["schema_check"] = self.schema_check
        return rec

    @classmethod
    def failed(cls, rid: Any, prompt: str | None, error: str) -> "GenResult":
        """The record for an input that could not be run (it keeps its place in the batch)."""
        return cls(rid, prompt, "", False, None, 0, error=error)


def user_message(prompt: str, constraint: Constraint | None, *, show_schema: bool = True) -> str:
    """The user message for `prompt`: with a schema constraint shown, the schema text first,
    with tools shown, the functions and the shape of a call first, then the prompt (the
    same text whether the model runs here or on a server). What is the same for every
    prompt comes first, so that batched records share its KV cache (and both bundled
    models answered more of the study's prompts right with the question last)."""
    if constraint is not None and constraint.kind == "schema" and show_schema:
        return f"{SCHEMA_INSTRUCTION}\n{json_text(constraint.schema)}\n\n{prompt}"
    if constraint is not None and constraint.tools is not None and show_schema:
        said = tools_instruction(constraint.tools)
        return f"{said}\n\n{prompt}" if said else prompt
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
        think: ThinkSettings | None = None,
    ) -> None:
        if constraint is not None and not isinstance(constraint, Constraint):
            raise UsageError(
                f"constraint must be a Constraint (Constraint.from_regex(...), load_constraint(...)) or None, "
                f"not {type(constraint).__name__}",
                parameter="constraint",
            )
        checked_max_tokens(max_tokens)
        self.model = model
        self.constraint = constraint
        self.params = params
        self.max_tokens = max_tokens
        self.chat = chat
        self.system = system
        self.show_schema = show_schema
        self.budget_aware = budget_aware
        self.fast_forward = fast_forward
        self.think = think
        self._compiled: CompiledGrammar | None = None
        self._full: Constraint | None = None
        self._full_of: Constraint | None = None
        self._compiled_for: object = None
        # with particles: their llama.cpp context and the last small language enumerated
        # (shared by the copies a batch makes for records' own settings)
        self._particle_contexts = ParticleContexts()
        self._exact: dict = {}

    @property
    def full_constraint(self) -> Constraint | None:
        """The constraint the output follows: with `think`, free text first, then `constraint`;
        a tools constraint with its markup as the vocabulary's control tokens where it has them."""
        if self.constraint is None:
            return None
        if self._full is None or self._full_of is not self.constraint:
            vocab = self.model.vocabulary
            c = self.constraint.with_control_tokens(lambda text: vocab.id_of_control(text) is not None)
            self._full = think_constraint(c, self.think, vocab) if self.think is not None else c
            self._full_of = self.constraint
        return self._full

    @property
    def tools(self) -> ToolSpec | None:
        """The tool spec the output follows (its control tokens included), for a tools constraint."""
        full = self.full_constraint
        return full.answer_part.tools if full is not None else None

    @property
    def compiled(self) -> CompiledGrammar | None:
        full = self.full_constraint
        if full is not None and (self._compiled is None or self._compiled_for is not full.grammar):
            self._compiled = compile_grammar(full.grammar, self.model.vocabulary)
            self._compiled_for = full.grammar
        return self._compiled

    def fight_monitor(self) -> FightMonitor:
        """A FightMonitor whose remedies fit this job's constraint and prompt."""
        kind = self.constraint.kind if self.constraint is not None else None
        return FightMonitor(prompt_remedy(kind, self.show_schema))

    def user_message(self, prompt: str) -> str:
        """The prompt, after the schema text when it is shown (and the think tags
        announced, with `think`): see user_message."""
        message = user_message(prompt, self.constraint, show_schema=self.show_schema)
        return announce(message, self.think) if self.think is not None else message

    def prompt_tokens(self, prompt: str) -> list[int]:
        """The prompt's token ids (chat template applied); InputError for text UTF-8 cannot encode."""
        if not isinstance(prompt, str):
            raise UsageError(f"prompt must be a string, not {type(prompt).__name__}", parameter="prompt")
        for name, text in (("prompt", prompt), ("system", self.system or "")):
            bad = surrogate_error(text)
            if bad is not None:
                raise InputError(f"the {name} {bad}")
        return self.model.encode_prompt(self.user_message(prompt), chat=self.chat, system=self.system)

    def decoder(self, prompt: str, *, seed: int | None = None) -> Decoder:
        """A Decoder for one prompt (iterate it for Steps)."""
        params = self.params if seed is None else _with_seed(self.params, seed)
        compiled = self.compiled
        think_tokens = self.think.think_tokens if self.think is not None else None
        matcher = Matcher(compiled, think_tokens=think_tokens) if compiled is not None else None
        args = (self.model, self.prompt_tokens(prompt), matcher, params)
        options = dict(max_tokens=self.max_tokens, budget_aware=self.budget_aware, fast_forward=self.fast_forward)
        if params.particles is not None:
            return ParticleDecoder(*args, contexts=self._particle_contexts, exact_cache=self._exact, **options)
        return Decoder(*args, **options)

    def run(
        self, prompt: str, *, rid: Any = 1, seed: int | None = None, on_step: Callable[[Step], None] | None = None
    ) -> GenResult:
        """Generate for one prompt and return its result record."""
        dec, monitor, watch, scorer = self.watched_decoder(prompt, seed=seed)
        dec.forced_logits = dec.forced_logits or on_step is not None
        for step in dec.steps():
            watch(step)
            if on_step is not None:
                on_step(step)
        return self.result_of(dec.result, rid, prompt, monitor, scorer)

    def run_many(
        self, prompts: Iterable[str], *, parallel: int = DEFAULT_PARALLEL, seeds: Iterable[int] | None = None
    ) -> Iterator[GenResult]:
        """Generate for many prompts, up to `parallel` at once (one model step for all of
        them: decode/batched.py), each with its own seed (`seeds`, default the job's);
        the results in input order (ids 1, 2, ...), each as soon as it is next in line.
        The first error (a prompt too long, a budget too small) is raised.

        Batched rows differ in the last bits from rows computed one at a time, so a token
        can differ from `run`; the same `parallel` and seeds give the same results."""
        if isinstance(prompts, str):
            raise UsageError("prompts must be an iterable of strings, not one string (use run)", parameter="prompts")
        order: InOrder[GenResult] = InOrder()
        seed_of = iter(seeds) if seeds is not None else None

        def requests() -> Iterator[Request]:
            for n, prompt in enumerate(prompts):
                seed = next(seed_of, _MISSING) if seed_of is not None else None
                if seed is _MISSING:
                    s = "" if n == 1 else "s"
                    raise UsageError(f"seeds: {n} seed{s} for more prompts (give one per prompt)", parameter="seeds")
                place = order.add()
                dec, monitor, on_step, scorer = self.watched_decoder(prompt, seed=seed)
                yield Request(dec, on_step=on_step, key=(place, prompt, monitor, scorer))

        if self.params.particles is not None:  # the particles of one generation are its batch
            for req in requests():
                place, prompt, monitor, scorer = req.key
                dec = req.decoder
                for step in dec.steps():
                    req.on_step(step)  # type: ignore[misc]
                order.put(place, self.result_of(dec.result, place + 1, prompt, monitor, scorer))
                yield from order.ready()
            return
        batch = BatchedDecoder(self.model, parallel)
        try:
            for req, outcome in batch.run(requests()):
                place, prompt, monitor, scorer = req.key
                if isinstance(outcome, MinistructError):
                    raise outcome
                order.put(place, self.result_of(outcome, place + 1, prompt, monitor, scorer))
                yield from order.ready()
        finally:
            batch.close()

    def watched_decoder(
        self, prompt: str, *, seed: int | None = None
    ) -> tuple[Decoder, FightMonitor, Callable[[Step], None], ToolScorer | None]:
        """A Decoder for one prompt with what watches its steps for its result record: the
        fight monitor, the tool scorer (for a tools constraint), and the callback that feeds
        both (the dictated rows are computed only when the scorer reads them)."""
        dec = self.decoder(prompt, seed=seed)
        monitor, scorer = self.fight_monitor(), self.tool_scorer()
        watch = watcher(monitor)
        on_step = watch if scorer is None else lambda step, w=watch, sc=scorer: (w(step), sc.observe(step))
        dec.forced_logits = scorer is not None  # the fight monitor needs no dictated rows
        return dec, monitor, on_step, scorer

    def tool_scorer(self) -> ToolScorer | None:
        """A scorer to watch the steps of one generation, for a tools constraint."""
        spec = self.tools
        return ToolScorer(spec, self.model.vocabulary) if spec is not None else None

    def schema_check(self, output: str, complete: bool) -> dict | None:
        """With keywords the grammar did not enforce (lenient), the output checked afterwards
        against the full schema by `check`'s validator: `not_enforced` (the keywords' pointers),
        `checked` (False for an incomplete output), `valid` (None when not checked), and for
        an invalid output the `pointer` and `reason`. None when the grammar is exact."""
        c = self.constraint
        ignored = c.not_enforced if c is not None else []
        if c is None or not ignored:
            return None
        out: dict[str, Any] = {"not_enforced": ignored, "checked": complete, "valid": None}
        if not complete:
            return out
        from ministruct.check.instance import InstanceChecker

        if getattr(self, "_full_checker", None) is None:
            self._full_checker = InstanceChecker(c.schema, source=c.source)
        verdict = self._full_checker.check(output)
        out["valid"] = verdict.accepted
        if not verdict.accepted:
            out.update(pointer=verdict.pointer, reason=verdict.reason)
        return out

    @staticmethod
    def lenient_warning(check: dict) -> str:
        """The record's warning line for a schema_check."""
        said = "lenient: some keywords were not enforced (" + ", ".join(check["not_enforced"]) + "); "
        if not check["checked"]:
            return said + "the output is incomplete and was not checked"
        said += "the output was checked against the full schema: "
        if check["valid"]:
            return said + "valid"
        where = f" at {check['pointer']}" if check.get("pointer") is not None else ""
        return said + f"INVALID{where}: {check['reason']}"

    def result_of(
        self,
        gen: Generation,
        rid: Any,
        prompt: str,
        monitor: FightMonitor | None = None,
        scorer: ToolScorer | None = None,
    ) -> GenResult:
        """The result record of a finished generation (with the fight warnings when a
        monitor watched its steps, and the tool scores when a scorer did)."""
        output, extra = gen.text, {}
        st = gen.phase_state
        if st is not None and self.think is not None:
            full = self.full_constraint
            close_len = len(self.think.close.encode()) if isinstance(full.boundary.close, str) else 0  # type: ignore[union-attr]
            reasoning, output = split_output(gen.output, st.answer_start, close_len, self.think.open)
            extra = {"reasoning": reasoning, "think_end": st.think_end, "think_tokens": st.think_tokens}
        res = GenResult(
            id=rid,
            prompt=prompt,
            output=output,
            complete=gen.complete,
            stop_reason=gen.stop_reason,
            n_tokens=gen.n_tokens,
            error=str(gen.error) if gen.error is not None else None,
            budget_limited=gen.budget_limited,
            warnings=monitor.warnings(output.encode()) if monitor is not None else [],
            generation=gen,
            particles=gen.particles.to_record() if gen.particles is not None else None,
            **extra,
        )
        if gen.particles is not None and gen.particles.p_valid == 0:
            res.warnings.append(
                "the base sampler never writes a valid output here (p_valid 0: the legal tokens fall outside "
                "its top-k/top-p or temperature 0's choice), so the output is the masked sampler's; "
                "--top-p 1 --top-k 0 conditions the whole distribution (docs/sampling.md)"
            )
        if self.constraint is not None and self.constraint.kind == "schema":
            res.has_json = True
            if gen.complete:
                try:
                    res.json_value = json.loads(output)
                except ValueError:
                    res.json_value = None
            res.schema_check = self.schema_check(output, gen.complete)
            if res.schema_check is not None:
                res.warnings.append(self.lenient_warning(res.schema_check))
        spec = self.tools
        if spec is not None:
            answer_start = (st.answer_start or 0) if st is not None and self.think is not None else 0
            marked = marked_answer(spec, gen, self.model.vocabulary, answer_start)
            read = read_calls(spec, marked.text, calls_at=marked.calls_at)
            for call in read.calls:  # the names' places in the output, which writes no control token
                call.name_offset = marked.output_offset(call.name_offset)
            res.has_tools = True
            res.content = read.content
            res.tool_calls = read.tool_calls(salt=f"{rid}\0{prompt}")
            if scorer is not None:
                res.tool_scores = scorer.scores(read, gen.output, shift=len(gen.text) - len(output))
        return res

    def persist(self) -> None:
        """Save the compiled grammar's learned masks to the disk cache."""
        if self._compiled is not None:
            self._compiled.persist()

    def close(self) -> None:
        """Free the particles' llama.cpp context and enumeration (made again when needed)."""
        self._particle_contexts.close()
        self._exact.clear()


@dataclass
class MarkedAnswer:
    """An answer's text with the tool markup's control tokens written out (they write no
    text in `output`), where the calls begin after a control-token trigger (None: no
    trigger token, or a text trigger found in the text), and where text was written in."""

    text: str
    calls_at: int | None
    written: list[tuple[int, int]]  # (character in `text`, length) of each control token written out

    def output_offset(self, char: int) -> int:
        """A character offset in `text` as one in the answer without the tokens' text."""
        return char - sum(n for at, n in self.written if at < char)


def marked_answer(spec: ToolSpec, gen: Generation, vocab: Vocabulary, answer_start: int = 0) -> MarkedAnswer:
    """The answer (from byte `answer_start` of the output) with the control tokens of the
    spec's markup written out as their text: the text `read_calls` reads. The trigger is
    known by its token, not its text: the free text may hold the trigger's text as plain text."""
    trigger = spec.format.trigger
    trigger_id = vocab.id_of_control(trigger) if trigger is not None and trigger in spec.control else None
    ids = {vocab.id_of_control(t): t for t in spec.control}
    buf, written, at_bytes = bytearray(), [], None
    pos = 0
    for t in gen.tokens:
        data = vocab.token_bytes(t)
        if pos >= answer_start:
            if t in ids:
                written.append((len(buf), ids[t]))
                buf += ids[t].encode()
                if t == trigger_id and at_bytes is None:
                    at_bytes = len(buf)
            else:
                buf += data
        pos += len(data)
    chars = [(len(buf[:b].decode("utf-8", "replace")), len(text)) for b, text in written]
    at = len(buf[:at_bytes].decode("utf-8", "replace")) if at_bytes is not None else None
    return MarkedAnswer(buf.decode("utf-8", "replace"), at, chars)


def watcher(monitor: FightMonitor) -> Callable[[Step], None]:
    """The on_step that shows a monitor the steps of the answer (thinking is free text:
    it cannot fight the grammar)."""

    def watch(step: Step) -> None:
        if step.phase != "think":
            monitor.observe(step)

    return watch


def _with_seed(params: SamplingParams, seed: int) -> SamplingParams:
    from dataclasses import replace

    return replace(params, seed=seed)

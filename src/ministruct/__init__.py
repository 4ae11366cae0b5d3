"""ministruct: grammar-constrained generation with local GGUF models, and the numbers
behind every step.

    import ministruct as ms

    model = ms.Model.load()                                  # the bundled SmolLM2-135M
    job = ms.GenerationJob(model, ms.load_constraint(regex="[0-9]{4}"), ms.SamplingParams(seed=1))
    print(job.run("Pick a year:").output)

Compile time and run time are separate: a `Grammar` (from GBNF, a regex, a JSON Schema
or a list of choices) is bound to a model's `Vocabulary` by `compile_grammar`; a
`Matcher` walks one generation through the resulting `CompiledGrammar`.
`LogitsProcessor` puts a constraint into llama-cpp-python's own loop
(`Llama.create_completion(..., logits_processor=...)`).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ministruct.check.instance import InstanceChecker
    from ministruct.decode.batched import BatchedDecoder, Request
    from ministruct.decode.logits_processor import LogitsProcessor
    from ministruct.decode.loop import Decoder, Generation, Step, generate
    from ministruct.decode.model import Model
    from ministruct.decode.sampling import SamplingParams
    from ministruct.engine.compile import CompiledGrammar, compile_grammar
    from ministruct.engine.matcher import Matcher
    from ministruct.engine.vocab import Vocabulary
    from ministruct.errors import (
        BudgetTooSmall,
        CompileLimitError,
        GrammarError,
        GrammarSyntaxError,
        InputError,
        MinistructError,
        ModelError,
        NoLegalContinuation,
        SchemaError,
        TokenRejected,
        UsageError,
    )
    from ministruct.grammar.constraint import Constraint, load_constraint
    from ministruct.grammar.ir import Grammar
    from ministruct.jobs.job import GenerationJob, GenResult

_EXPORTS = {
    "BatchedDecoder": "ministruct.decode.batched",
    "BudgetTooSmall": "ministruct.errors",
    "CompileLimitError": "ministruct.errors",
    "CompiledGrammar": "ministruct.engine.compile",
    "Constraint": "ministruct.grammar.constraint",
    "Decoder": "ministruct.decode.loop",
    "GenResult": "ministruct.jobs.job",
    "Generation": "ministruct.decode.loop",
    "GenerationJob": "ministruct.jobs.job",
    "Grammar": "ministruct.grammar.ir",
    "GrammarError": "ministruct.errors",
    "GrammarSyntaxError": "ministruct.errors",
    "InputError": "ministruct.errors",
    "InstanceChecker": "ministruct.check.instance",
    "LogitsProcessor": "ministruct.decode.logits_processor",
    "Matcher": "ministruct.engine.matcher",
    "MinistructError": "ministruct.errors",
    "Model": "ministruct.decode.model",
    "ModelError": "ministruct.errors",
    "NoLegalContinuation": "ministruct.errors",
    "Request": "ministruct.decode.batched",
    "SamplingParams": "ministruct.decode.sampling",
    "SchemaError": "ministruct.errors",
    "Step": "ministruct.decode.loop",
    "TokenRejected": "ministruct.errors",
    "UsageError": "ministruct.errors",
    "Vocabulary": "ministruct.engine.vocab",
    "compile_grammar": "ministruct.engine.compile",
    "generate": "ministruct.decode.loop",
    "load_constraint": "ministruct.grammar.constraint",
}


def __getattr__(name: str) -> Any:
    """The public names load on first use, so `python -m ministruct --help` or a `check`
    does not import the whole library."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("ministruct")
        except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
            value = "0+unknown"
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'ministruct' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "BatchedDecoder",
    "BudgetTooSmall",
    "CompileLimitError",
    "CompiledGrammar",
    "Constraint",
    "Decoder",
    "GenResult",
    "Generation",
    "GenerationJob",
    "Grammar",
    "GrammarError",
    "GrammarSyntaxError",
    "InputError",
    "InstanceChecker",
    "LogitsProcessor",
    "Matcher",
    "MinistructError",
    "Model",
    "ModelError",
    "NoLegalContinuation",
    "Request",
    "SamplingParams",
    "SchemaError",
    "Step",
    "TokenRejected",
    "UsageError",
    "Vocabulary",
    "__version__",
    "compile_grammar",
    "generate",
    "load_constraint",
]

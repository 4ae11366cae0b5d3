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

from ministruct.check.instance import InstanceChecker
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

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("ministruct")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
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

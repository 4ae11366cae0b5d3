"""A child process for tests: llama.cpp's verdict on GBNF grammars and texts.

Reads one JSON object per stdin line, `{"gbnf": TEXT, "texts": [STRING, ...]}`, and
answers one per stdout line, `{"parsed": bool, "accepts": [bool, ...]}`: whether
llama-cpp-python takes the grammar (`LlamaGrammar.from_string`, then llama.cpp's own
parser, `llama_sampler_init_grammar`, as its server does) and, per text, whether
llama.cpp's grammar sampler accepts the whole text fed byte by byte, then
end-of-generation. A grammar that crashes llama.cpp ends this process: the parent sees
which one by the answer missing.
"""

from __future__ import annotations

import json
import sys

import llama_cpp
from oracles import LlamaGrammarOracle, single_byte_tokens  # tests/ is on sys.path

from ministruct.decode.gguf import bundled_model_path
from ministruct.decode.model import Model


def main() -> None:
    model = Model.load(bundled_model_path(), vocab_only=True)
    llm = llama_cpp.Llama(str(model.path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n = int(llama_cpp.llama_vocab_n_tokens(vocab))
    byte_token = single_byte_tokens(model.vocabulary)
    eog = min(model.vocabulary.eog_ids)
    print(json.dumps({"ready": True, "bytes": sorted(byte_token)}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        llama_cpp.LlamaGrammar.from_string(job["gbnf"], verbose=False)
        parsed = LlamaGrammarOracle.accepts_grammar(vocab, job["gbnf"])
        accepts = []
        if parsed:
            for text in job["texts"]:
                oracle = LlamaGrammarOracle(vocab, n, job["gbnf"])
                accepts.append(oracle.accepts_text(text.encode("utf-8"), byte_token, eog))
                oracle.close()
        print(json.dumps({"parsed": parsed, "accepts": accepts}), flush=True)


if __name__ == "__main__":
    main()

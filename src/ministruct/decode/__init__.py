"""One generation on a local model: tokens in, tokens out, a Step per token.

In: a Model, prompt token ids, a Matcher and SamplingParams. Out: Steps (token, logits
row, legal set) and a Generation. gguf.py is the only module of the project that imports
llama_cpp. Never imports jobs, diagnostics, the fleet or the command line.

Files, in the order data flows through them:
    gguf.py              the model file: where it is, llama_cpp (llama_lib), its exact vocabulary
    model.py             the model boundary: load, tokenize, chat template, evaluate, logits rows
    sequences.py         many sequences of a model in one context, one decode for all (Sequences)
    sampling.py          the sampler (mask -> temperature -> penalty -> softmax -> top-k -> top-p)
    fast_forward.py      dictated stretches planned as tokens and evaluated in one batch
    loop.py              the decode loop (Decoder, generate)
    batched.py           many generations at once, one model step for all (BatchedDecoder)
    smc.py               particles: the base sampler conditioned on validity (weights, ESS, resampling)
    exact.py             a small language's exact conditional: its outputs scored under the model
    particles.py         particles on the model: batched sequences, or a small language enumerated
    defaults.py          defaults the command line's help shows (DEFAULT_PARALLEL)
    interrupt.py         a batch's second signal stops a batched evaluation in progress
    logits_processor.py  a constraint inside llama-cpp-python's own loop
"""

"""A batch's second signal stops a batched evaluation in progress (decode/interrupt.py,
issue 52: under --parallel 16 the second SIGINT waited for the evaluation, seconds on a
busy machine, 48.7 s in the probe). The signals are counted in memory that llama.cpp's
abort callback reads itself: after two, an evaluation stops at its first graph node."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from ministruct.decode.interrupt import Aborted, signal_bytes
from ministruct.decode.sequences import Sequences
from ministruct.jobs.batch import Abandoned, Interrupts

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def seqs(model):
    s = Sequences(model, 2, 256)
    yield s
    s.close()


def _work(model) -> list[tuple[int, list[int], int]]:
    toks = model.tokenize("One two three four five six seven eight nine ten. " * 8, add_bos=True, special=False)
    return [(0, toks[:100], 1), (1, toks[:90], 1)]


def test_after_a_second_signal_a_batched_evaluation_stops_at_once(model, seqs):
    seqs.clear_all()
    want = seqs.decode(_work(model))
    with Interrupts() as intr:
        os.kill(os.getpid(), signal.SIGTERM)  # the first: the evaluation goes on
        assert intr.signum == signal.SIGTERM
        seqs.clear_all()
        got = seqs.decode(_work(model))
        assert all(np.array_equal(a, b) for a, b in zip(want, got))
        with pytest.raises(Abandoned):
            os.kill(os.getpid(), signal.SIGTERM)  # the second (its handler runs here: the byte is set too)
        seqs.clear_all()
        with pytest.raises(Aborted):
            seqs.decode(_work(model))
    seqs.clear_all()
    again = seqs.decode(_work(model))  # outside the batch, signals are not counted
    assert all(np.array_equal(a, b) for a, b in zip(want, again))


def _wakeup_fd() -> int:
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


def test_signals_are_counted_only_inside_the_block():
    before = _wakeup_fd()
    with signal_bytes():
        inside = _wakeup_fd()
    assert inside >= 0 and inside != before
    assert _wakeup_fd() == before  # (whatever it was: -1, or a program's own)

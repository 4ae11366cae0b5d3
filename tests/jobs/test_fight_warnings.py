"""Fighting-the-grammar warnings (fight.py): the three signs and their thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from ministruct.decode.loop import Step
from ministruct.decode.sampling import legal_mass
from ministruct.jobs.fight_warnings import FightMonitor, prompt_remedy, repeated_pattern


def test_legal_mass_is_the_softmax_mass_of_the_mask():
    logits = np.log(np.asarray([0.5, 0.25, 0.125, 0.125], dtype=np.float32))
    mask = np.asarray([False, True, True, False])
    assert abs(legal_mass(logits, mask) - 0.375) < 1e-6
    assert legal_mass(logits, None) == 1.0


def test_repeated_pattern_finds_loops_of_eight_bytes_four_times():
    assert repeated_pattern(b'{"a":' + b'"key","key",' * 4) is not None
    pattern, copies = repeated_pattern(b"x" + b" " * 40 + b"y")
    assert set(pattern) == {0x20} and copies * len(pattern) <= 40
    assert repeated_pattern(b"abcdefgh" * 3) is None  # three copies are not a loop yet
    assert repeated_pattern(b"abcdefg" * 6) is None or len(repeated_pattern(b"abcdefg" * 6)[0]) >= 8
    assert repeated_pattern(b'{"name":"Pancakes","servings":4}') is None


def test_low_mean_z_over_free_steps_warns():
    m = FightMonitor()
    for _ in range(10):
        m.add(0.1, forced=False)
    m.add(0.001, forced=True)  # forced steps do not count towards the mean
    (w,) = m.warnings(b"ok")
    assert (
        "mean legal mass Z over 10 free steps is 0.100" in w
        and "say in the prompt what the output should look like" in w
    )


def test_a_long_run_of_very_low_z_warns_even_when_the_mean_is_fine():
    m = FightMonitor()
    for _ in range(40):
        m.add(0.9, forced=False)
    for _ in range(16):
        m.add(0.01, forced=True)
    (w,) = m.warnings(b"ok")
    assert "16 steps in a row had Z < 0.05" in w
    short = FightMonitor()
    for z in [0.9] * 40 + [0.01] * 15 + [0.9] + [0.01] * 15:
        short.add(z, forced=True)
    assert short.warnings(b"ok") == []


def test_fast_forwarded_steps_are_left_out_with_or_without_their_row():
    """A dictated token was not drawn: it neither counts towards the mean nor extends or
    breaks a run, whether its Step carries a logits row (a trace) or not (plain gen)."""
    logits = np.log(np.asarray([0.01, 0.01, 0.98], dtype=np.float32))
    drawn = np.asarray([True, True, False])  # Z = 0.02, against the model
    dictated = np.asarray([False, False, True])  # Z = 0.98: it would break the run if it counted

    with_rows, without = FightMonitor(), FightMonitor()
    for m, ff_logits in ((with_rows, logits), (without, None)):
        for k in range(32):
            ff = k % 2 == 1
            m.observe(Step(k, 0, b"x", ff_logits if ff else logits, dictated if ff else drawn, 0.0, fast_forward=ff))
    assert with_rows.z_free == without.z_free and len(without.z_free) == 16
    assert with_rows.longest_run == without.longest_run == 16
    assert with_rows.warnings(b"ok") == without.warnings(b"ok") != []


def test_a_loop_in_the_output_warns_with_the_pattern():
    (w,) = FightMonitor().warnings(b'{"steps":[' + b'"stir well",' * 5)
    assert "repeats" in w and "stir well" in w and "looping" in w


def test_a_healthy_generation_has_no_warnings():
    m = FightMonitor()
    for z in (0.99, 0.7, 1.0, 0.3):
        m.add(z, forced=False)
    assert m.warnings(b'{"name":"Pancakes","servings":4}') == []


@pytest.mark.parametrize(
    "kind, shown, remedy",
    [
        ("schema", False, "show the schema in the prompt"),
        ("schema", True, "say in the prompt what the output should look like"),
        ("regex", True, "say in the prompt what the output should look like"),  # was "show the schema"
        ("choice", True, "say in the prompt what the output should look like"),
        (None, True, "say in the prompt what the output should look like"),
    ],
)
def test_the_prompt_remedy_fits_the_constraint(kind, shown, remedy):
    m = FightMonitor(prompt_remedy(kind, shown))
    for _ in range(20):
        m.add(0.01, forced=False)
    got = m.warnings(b"")
    assert got and all(f"; {remedy}, " in w for w in got)
    assert all("schema" not in w for w in got) or kind == "schema"


def test_a_mean_over_fewer_than_four_free_steps_is_not_judged():
    # issue 52: "mean Z over 1 free steps" on every two-way choice
    for n, warns in ((1, False), (3, False), (4, True)):
        m = FightMonitor()
        for _ in range(n):
            m.add(0.01, forced=False)
        assert bool(m.warnings(b"no")) == warns, n

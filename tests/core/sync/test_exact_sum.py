"""The exact float sum (mmeval.core.exact_sum) and the ``exact_sum`` state: the same bits for any permutation and
any partition of the same floats, equal to the correctly rounded sum of the values.

The reference is written from the definition: the exact rational sum (``fractions.Fraction``) rounded once to
float64 by Python's correctly rounded ``int / int`` (``math.fsum`` agrees where it does not overflow on the
way), with IEEE 754's rules for the special values. Infinities and NaN are *handled*, not refused: NaN when a
NaN or both infinities occur, else the infinity's sign; an exact zero is -0.0 only when every summand is -0.0.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import List

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmeval.core import exact_sum
from mmeval.core.state import MetricState, StateSpec, combine, pack, reduce_rows, unpack

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX = np.finfo(np.float64).max
TINY = 5e-324  # the smallest subnormal


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def reference(values: List[float]) -> float:
    """The correctly rounded sum of ``values`` by IEEE 754's rules, from the exact rational sum."""
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values or -math.inf in values:
        return math.inf if math.inf in values else -math.inf
    exact = sum((Fraction(v) for v in values), Fraction(0))
    if exact == 0:
        return -0.0 if values and all(v == 0 and math.copysign(1, v) < 0 for v in values) else 0.0
    try:
        return exact.numerator / exact.denominator
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def total(values: List[float]) -> float:
    return float(exact_sum.rounded(exact_sum.accumulate(np.array(values, dtype=np.float64).reshape(-1))))


def same_bits(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or bits(a) == bits(b)


# floats of every kind: any finite float64 (subnormals and both zeros included), huge and tiny ones together,
# values with their negations (cancellation), and -- in their own strategy -- infinities and NaN
finite = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
extreme = st.sampled_from([MAX, -MAX, TINY, -TINY, 0.0, -0.0, 2.0**-1022, 1.0, -1.0, 2.0**1023, 2.0**-1074 * 3])
mixed = st.lists(st.one_of(finite, extreme), max_size=60)


@st.composite
def cancelling(draw: st.DrawFn) -> List[float]:
    """Values and their exact negations, plus a few small ones: the big terms cancel, the small ones remain."""
    big = draw(st.lists(st.one_of(finite, extreme), max_size=20))
    small = draw(st.lists(st.floats(min_value=-1e-300, max_value=1e-300, allow_subnormal=True), max_size=5))
    return big + [-v for v in big] + small


@st.composite
def split(draw: st.DrawFn, values: st.SearchStrategy[List[float]]) -> tuple:
    """The values, a permutation of them, and a partition of that permutation into consecutive parts."""
    vals = draw(values)
    perm = draw(st.permutations(vals))
    cuts = sorted(draw(st.lists(st.integers(0, len(vals)), max_size=5)))
    parts = [perm[a:b] for a, b in zip([0] + cuts, cuts + [len(vals)])]
    return vals, parts


def partitioned_total(parts: List[List[float]]) -> float:
    """The sum of ``parts`` accumulated separately and added, as ranks do (normalised, then added)."""
    acc = exact_sum.zeros()
    for part in parts:
        one = exact_sum.normalised(exact_sum.accumulate(np.array(part, dtype=np.float64).reshape(-1)))
        acc = exact_sum.add(acc, one)
    return float(exact_sum.rounded(acc))


@PROPERTY
@given(split(st.one_of(mixed, cancelling())))
def test_any_permutation_and_partition_gives_the_correctly_rounded_sum(case: tuple) -> None:
    values, parts = case
    want = reference(values)
    assert same_bits(total(values), want), (values, total(values), want)
    assert same_bits(partitioned_total(parts), want), (parts, partitioned_total(parts), want)


@PROPERTY
@given(split(st.lists(st.one_of(finite, st.sampled_from([math.inf, -math.inf, math.nan])), max_size=30)))
def test_infinities_and_nan_follow_ieee_addition_in_any_order(case: tuple) -> None:
    values, parts = case
    assert same_bits(partitioned_total(parts), reference(values))


@PROPERTY
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=40))
def test_agrees_with_math_fsum_where_fsum_does_not_overflow(values: List[float]) -> None:
    try:
        want = math.fsum(values)
    except OverflowError:  # fsum overflows on the way; the exact sum may still be finite
        return
    got = total(values)
    if want == 0.0:  # math.fsum([-0.0]) is +0.0; a zero's sign (IEEE's rule) is test_signed_zeros_empty_and_overflow's
        assert got == 0.0
    else:
        assert same_bits(got, want)


def test_signed_zeros_empty_and_overflow() -> None:
    assert bits(total([])) == bits(0.0)
    assert bits(total([-0.0])) == bits(-0.0)
    assert bits(partitioned_total([[-0.0], [], [-0.0]])) == bits(-0.0)  # an empty part is no +0.0 summand
    assert bits(total([-0.0, 0.0])) == bits(0.0)
    assert bits(total([1.0, -1.0])) == bits(0.0)
    assert total([MAX, MAX]) == math.inf and total([-MAX, -MAX]) == -math.inf
    assert total([MAX, MAX, -MAX]) == MAX  # float64 additions overflow on the way; the exact sum does not
    assert total([TINY] * 3) == 3 * TINY and total([2.0**1023, 2.0**-1074, -(2.0**1023)]) == TINY


def test_many_rows_carry_between_chunks() -> None:
    """More rows than one chunk between carries: the carries keep every limb in range."""
    rng = np.random.default_rng(3)
    values = rng.normal(size=20_000) * 2.0 ** rng.integers(-60, 60, 20_000)
    values[::7] = MAX / 4
    acc = exact_sum.accumulate(values)
    assert bits(float(exact_sum.rounded(acc))) == bits(reference(values.tolist()))
    assert np.abs(acc[: exact_sum.LIMBS - 1]).max() < 2**62


def test_vector_statistic_sums_each_element() -> None:
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(50, 2, 3)) * 1e10
    got = exact_sum.rounded(exact_sum.accumulate(rows))
    want = [[reference(rows[:, i, j].tolist()) for j in range(3)] for i in range(2)]
    assert got.shape == (2, 3) and got.tobytes() == np.array(want).tobytes()


# -- the declared state ----------------------------------------------------------------------------------------

SPECS = [StateSpec("s", (2,), "float64", "exact_sum"), StateSpec("n", (), "int64", "sum")]


@PROPERTY
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=30), st.data())
def test_state_combine_pack_unpack_keep_the_bits(rows: list, data: st.DataObject) -> None:
    """Rows reduced per part, combined, packed, summed as an ``all_reduce`` would, unpacked: one set of bits."""
    arr = np.array(rows, dtype=np.float64)
    cut = data.draw(st.integers(0, len(rows)))
    order = np.array(data.draw(st.permutations(range(len(rows)))), dtype=np.int64)
    parts = [arr[order[:cut]], arr[order[cut:]]]
    states = [reduce_rows(SPECS, {"s": p, "n": np.ones(len(p), dtype=np.int64)} if len(p) else None) for p in parts]
    whole = reduce_rows(SPECS, {"s": arr, "n": np.ones(len(arr), dtype=np.int64)})
    combined = combine(SPECS, states[0], states[1])
    wire = sum(pack(SPECS, s)[("int64", "sum")] for s in states)
    reduced = unpack(SPECS, {("int64", "sum"): wire})
    want = np.array([reference(arr[:, j].tolist()) for j in range(2)])
    for state in (whole, combined, reduced):
        assert state["s"].dtype == np.float64 and state["s"].tobytes() == want.tobytes()
        assert int(state["n"]) == len(rows)
    assert reduced.num_samples == len(rows)


def test_exact_sum_is_declared_on_float64_only_and_packs_as_int64() -> None:
    import pytest

    with pytest.raises(ValueError, match="needs dtype 'float64'"):
        StateSpec("s", (), "int64", "exact_sum")
    packed = pack(SPECS, reduce_rows(SPECS, None))
    assert list(packed) == [("int64", "sum")] and packed[("int64", "sum")].size == 2 * exact_sum.WIDTH + 2
    assert isinstance(unpack(SPECS, packed), MetricState)


def test_a_state_without_its_accumulator_counts_its_value_once() -> None:
    """A metric that builds a MetricState itself (no accumulator) still combines: its value is one summand."""
    mine = MetricState(s=np.array([0.1, -0.0]), n=np.int64(1))
    other = reduce_rows(SPECS, {"s": np.array([[0.2, -0.0]]), "n": np.ones(1, dtype=np.int64)})
    got = combine(SPECS, mine, other)
    assert got["s"].tobytes() == np.array([reference([0.1, 0.2]), -0.0]).tobytes()


@PROPERTY
@given(st.lists(st.one_of(finite, extreme, st.sampled_from([math.inf, -math.inf, math.nan])), max_size=40))
def test_python_and_numpy_digits_agree(values: List[float]) -> None:
    """accumulate() sums a few values as Python ints and more as numpy digits: the same accumulator either way."""
    rows = np.array(values, dtype=np.float64).reshape(-1, 2) if len(values) % 2 == 0 else np.array(values)
    small = exact_sum.normalised(exact_sum.accumulate(rows))
    saved, exact_sum._SMALL = exact_sum._SMALL, -1
    try:
        vectorised = exact_sum.normalised(exact_sum.accumulate(rows))
    finally:
        exact_sum._SMALL = saved
    assert np.array_equal(small, vectorised)

"""The arithmetic of block layouts and MPI counts, including blocks over 2 GiB (no MPI involved)."""

from __future__ import annotations

import random
from typing import List

import pytest

pytest.importorskip("mmeval_mpi4py")
from mmeval_mpi4py.layout import INT_MAX, MAX_UNIT, Layout, align_up, plan_block, plan_blocks

GiB = 2**30


def check_layout(lay: Layout, sizes: List[int], max_count: int, big_count: bool) -> None:
    """Every invariant a transport relies on."""
    unit = lay.unit
    assert unit >= 1 and unit & (unit - 1) == 0, "the unit is a power of two"
    assert lay.sizes == tuple(sizes)
    align = max(64, unit)
    end = 0
    for size, count, displ, off in zip(sizes, lay.counts, lay.displs, lay.offsets):
        assert off == displ * unit, "displacements count units"
        assert off % align == 0, "every block is aligned"
        assert off >= end, "blocks do not overlap"
        assert size <= count * unit < size + unit, "a block is padded by less than one unit"
        end = off + count * unit
        if not big_count:
            assert count <= max_count and displ <= max_count, "MPI ints hold every count and displacement"
    assert end <= lay.nbytes, "the receive buffer holds every block"
    assert lay.nbytes < end + align or not sizes


def test_small_blocks_are_bytes() -> None:
    lay = plan_blocks([5000, 0, 70, 4096], big_count=False)
    assert lay.unit == 1
    assert lay.counts == (5000, 0, 70, 4096)
    assert lay.offsets == (0, 5056, 5056, 5184)
    assert lay.nbytes == 5184 + 4096


def test_blocks_over_int_max_use_a_unit() -> None:
    sizes = [3 * GiB + 5, 100, 5 * GiB]
    lay = plan_blocks(sizes, big_count=False)
    check_layout(lay, sizes, INT_MAX, big_count=False)
    assert lay.unit == 4  # 5 GiB / 4 < 2**31 - 1 and the last displacement (8 GiB + ...) / 4 fits too
    assert lay.padded(0) == 3 * GiB + 8


def test_big_count_keeps_bytes() -> None:
    sizes = [3 * GiB + 5, 100, 5 * GiB]
    lay = plan_blocks(sizes, big_count=True)
    check_layout(lay, sizes, INT_MAX, big_count=True)
    assert lay.unit == 1 and lay.counts[0] == 3 * GiB + 5 and lay.counts[0] > INT_MAX


def test_the_unit_is_the_smallest_that_fits() -> None:
    # 2**31 bytes: one byte more than an int holds -> units of 2 bytes
    assert plan_block(2**31, big_count=False) == (2, 2**30)
    assert plan_block(INT_MAX, big_count=False) == (1, INT_MAX)
    assert plan_block(2**31 + 1, big_count=False) == (2, 2**30 + 1)
    assert plan_block(2**31 + 1, big_count=True) == (1, 2**31 + 1)
    assert plan_block(0, big_count=False) == (1, 0)


def test_displacements_count_too() -> None:
    # each block fits alone, but the last one starts past INT_MAX bytes
    sizes = [GiB, GiB, GiB]
    lay = plan_blocks(sizes, big_count=False)
    assert lay.unit == 2
    check_layout(lay, sizes, INT_MAX, big_count=False)


@pytest.mark.parametrize("seed", range(40))
def test_random_layouts(seed: int) -> None:
    rng = random.Random(seed)
    max_count = rng.choice([INT_MAX, 1000, 4097, 2**20])
    ws = rng.randint(1, 9)
    top = min(2**40, max_count * 2**24 // 10)  # the total always fits some unit up to MAX_UNIT
    sizes = [rng.choice([0, rng.randint(1, 5000), rng.randint(1, top)]) for _ in range(ws)]
    for big in (False, True):
        lay = plan_blocks(sizes, big_count=big, max_count=max_count)
        check_layout(lay, sizes, max_count, big)


def test_impossible_sizes_raise() -> None:
    with pytest.raises(OverflowError):
        plan_blocks([MAX_UNIT * 2**33], big_count=False)
    with pytest.raises(ValueError):
        plan_blocks([-1], big_count=False)


def test_align_up() -> None:
    assert [align_up(n, 64) for n in (0, 1, 63, 64, 65)] == [0, 64, 64, 64, 128]

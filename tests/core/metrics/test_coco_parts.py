"""COCODetection's split of a rank's summaries into one part per rank, checked against the definition.

``split_summaries`` must put every detection of category ``k`` in part ``owners[k]``, in the order the
rank holds them, with each image's count of them, and list in a part exactly the images that have a
detection there -- at any world size (a loop over the detections is the reference here).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np
import pytest

from mmeval.metrics.coco_accumulate import AREA_RANGES
from mmeval.metrics.coco_parts import split_summaries


def _summaries(rng: np.random.Generator, n_img: int, k_all: int, words: int):
    lens = rng.integers(0, 9, n_img).astype(np.int64)
    lens[rng.random(n_img) < 0.2] = 0  # images with no detections
    n = int(lens.sum())
    cats = rng.integers(0, k_all, n).astype(np.uint16)
    scores = rng.random(n)
    states = rng.integers(0, 2**62, (n, words), dtype=np.uint64)
    gt_cat = rng.integers(0, k_all, 3 * n_img).astype(np.uint16)
    gt_ig = rng.integers(0, 16, 3 * n_img).astype(np.uint8)
    return lens, cats, scores, states, gt_cat, gt_ig


def _by_loop(lens, cats, owners, rank) -> Tuple[List[int], List[int]]:
    """(places of rank's detections in input order, per-image counts) by walking the detections."""
    places, counts, at = [], [], 0
    for n in lens.tolist():
        c = 0
        for i in range(at, at + n):
            if owners[int(cats[i])] == rank:
                places.append(i)
                c += 1
        counts.append(c)
        at += n
    return places, counts


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
@pytest.mark.parametrize("dealt", ["modulo", "random", "one_rank_empty"])
def test_every_detection_goes_to_its_categorys_owner_in_order(world_size: int, dealt: str) -> None:
    rng = np.random.default_rng(world_size * 10 + len(dealt))
    n_img, k_all, words = 40, 13, 2
    lens, cats, scores, states, gt_cat, gt_ig = _summaries(rng, n_img, k_all, words)
    owners = {
        "modulo": np.arange(k_all) % world_size,
        "random": rng.integers(0, world_size, k_all),
        "one_rank_empty": np.zeros(k_all, dtype=np.int64),
    }[dealt]
    positions = np.arange(n_img, dtype=np.int64) * 3 + 1
    img_ids = positions + 1000
    has_id = rng.random(n_img) < 0.5
    dets = [(lens, lambda: scores.copy(), cats, lambda: states.reshape(-1).copy())]
    parts = split_summaries(
        positions, img_ids, has_id, dets, gt_cat, gt_ig, k_all, world_size, None if dealt == "modulo" else owners
    )
    assert len(parts) == world_size
    seen = 0
    for r, part in enumerate(parts):
        assert part[0].tolist() == [r, world_size]
        assert part[1].tolist() == np.flatnonzero(owners == r).tolist()
        places, counts = _by_loop(lens, cats, owners, r)
        counts = np.asarray(counts)
        with_dets = counts > 0
        assert part[2].tolist() == positions[with_dets].tolist()
        assert part[3].tolist() == img_ids[with_dets].tolist()
        assert part[4].tolist() == has_id[with_dets].astype(np.uint8).tolist()
        assert part[5].tolist() == counts[with_dets].tolist()
        assert np.array_equal(part[6], scores[places])
        assert np.array_equal(part[7], cats[places]) and part[7].dtype == cats.dtype
        assert np.array_equal(part[8], states[places].reshape(-1))
        # the ground truths that count, per own category and area range, and over all categories
        n_rng = len(AREA_RANGES)
        want = np.zeros((k_all, n_rng), dtype=np.int64)
        for c, ig in zip(gt_cat.tolist(), gt_ig.tolist()):
            for a in range(n_rng):
                if not (ig >> a) & 1:
                    want[c, a] += 1
        assert part[9].tolist() == want[owners == r].reshape(-1).tolist()
        assert part[10].tolist() == want.sum(axis=0).tolist()
        assert part[11].tolist() == [int(lens.sum())]
        seen += len(places)
    assert seen == int(lens.sum())


def test_proposal_detections_all_go_to_rank_0() -> None:
    rng = np.random.default_rng(5)
    lens, cats, scores, states, gt_cat, gt_ig = _summaries(rng, 12, 4, 1)
    zeros = np.zeros(cats.shape[0], dtype=np.uint8)
    dets = [(lens, lambda: scores.copy(), zeros, lambda: states.reshape(-1).copy())]
    pos = np.arange(12, dtype=np.int64)
    parts = split_summaries(
        pos, pos, np.ones(12, bool), dets, gt_cat, gt_ig, 4, 3, np.array([0, 1, 2, 1]), proposal=[True]
    )
    assert np.array_equal(parts[0][6], scores) and parts[0][5].tolist() == lens[lens > 0].tolist()
    for part in parts[1:]:
        assert part[2].size == 0 and part[6].size == 0 and part[8].size == 0

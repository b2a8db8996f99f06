"""COCODetection's summaries split by category owner and joined again on the owning rank.

Across ranks, rank ``r`` accumulates the categories ``k`` with ``owners[k] ==
r`` (:mod:`mmeval.core.sync.partitioned` deals them by the world's detections per
category; ``k % world_size`` without that): :func:`split_summaries` makes,
from a rank's packed image summaries, one part per rank; :func:`join_parts`
joins the parts every rank sent one rank, the images in ranking order, and
:class:`JoinedPart` accumulates its categories (:mod:`.coco_accumulate`).
``'proposal'`` has one category for every detection, on rank 0.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .coco_accumulate import AREA_RANGES, REC_THRS, accumulate, ranked, runs

__all__ = ["JOIN_DETECTIONS", "JoinedPart", "join_parts", "split_summaries"]

#: detections :func:`join_parts` places at a time: its working memory beyond the joined columns, ~24 bytes each
JOIN_DETECTIONS = 1 << 13


class JoinedPart:
    """The parts every rank sent to one rank (:func:`join_parts`), ready to accumulate its categories.

    ``dets_of``: per metric, each image's detection count and the detections'
    scores, categories and state words, the images already in ranking order;
    ``own``: the categories this rank accumulates, rising.
    """

    def __init__(
        self,
        rank: int,
        own: np.ndarray,
        dets_of: List[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
        npig_own: np.ndarray,
        npig_all: np.ndarray,
        dets: np.ndarray,
        duplicate_ids: bool,
    ) -> None:
        self.rank, self.own = rank, own
        self.dets_of = dets_of
        self.npig_own, self.npig_all, self.dets, self.duplicate_ids = npig_own, npig_all, dets, duplicate_ids

    def accumulate(
        self,
        metrics: Sequence[str],
        npig_file: Optional[np.ndarray],
        thrs: np.ndarray,
        max_dets: Sequence[int],
        classwise: bool,
        curves: bool = False,
    ) -> Dict[str, Any]:
        """Per metric, this rank's categories' precision summed over recall points, recall and classwise AP.

        With ``curves`` (``keep_curves``), also ``"curves"``: the (T, R)
        interpolated precision of each of its categories with ground truth at
        area 'all', at the largest ``maxDets``, from the same accumulation
        (T * R * 8 bytes a category: 8 KB at COCO's 10 x 101).

        A metric's categories here are :attr:`own` (``'proposal'`` has one,
        on rank 0); ``npig_file``: the ground-truth counts of an annotation
        file, else the parts' counts. Runs once: the detections are dropped
        as each metric is done.
        """
        r, own = self.rank, self.own
        out: List[Dict[str, np.ndarray]] = []
        local: Optional[np.ndarray] = None  # each category's place among this rank's, where it is not the identity
        if own.shape[0] and (own.shape[0] != int(own[-1]) + 1):
            local = np.zeros(int(own[-1]) + 1, dtype=np.int32)
            local[own] = np.arange(own.shape[0], dtype=np.int32)
        for metric in metrics:
            lens, scores, cats, states = self.dets_of.pop(0)  # their memory goes with this metric's work
            if metric == "proposal":
                total = npig_file.sum(axis=0) if npig_file is not None else self.npig_all
                npig = total[None, :] if r == 0 else np.zeros((0, total.shape[0]), dtype=np.int64)
            elif npig_file is not None:
                npig = npig_file[own]
            else:
                npig = self.npig_own
            into = local if metric != "proposal" and local is not None else None
            ranking = ranked(scores, cats if into is None else into[cats], lens, npig.shape[0])
            del scores, cats  # ranked: only the states are read from here on
            q = np.full((npig.shape[0], thrs.shape[0], REC_THRS.shape[0]), -1.0) if curves else None
            psum, tps, cw = accumulate(ranking, states, npig, thrs, max_dets, classwise, q)
            del ranking, states
            # only the cells with ground truth (the others are -1 by definition): what LVIS's many
            # categories without objects in an area range would otherwise send
            live = npig > 0
            count_type = np.uint16 if not tps.size or int(tps.max()) < 65535 else np.int32
            out.append(
                {
                    "npig": npig.astype(np.int64),
                    "psum": psum[:, live],
                    "tp": tps[:, live].astype(count_type),
                    "classwise": cw,
                }
            )
            if q is not None:
                out[-1]["curves"] = q[live[:, 0]]
        cat_type = np.uint16 if not own.size or int(own[-1]) < 65535 else np.int64
        return {"cats": own.astype(cat_type), "dets": [int(d) for d in self.dets], "metrics": out}


def split_summaries(
    positions: np.ndarray,
    img_ids: np.ndarray,
    has_id: np.ndarray,
    dets: Sequence[Tuple[np.ndarray, Callable[[], np.ndarray], np.ndarray, Callable[[], np.ndarray]]],
    gt_cat: np.ndarray,
    gt_ig: np.ndarray,
    k_all: int,
    world_size: int,
    owners: Optional[np.ndarray] = None,
    proposal: Sequence[bool] = (),
    digests: Optional[np.ndarray] = None,
) -> List[List[np.ndarray]]:
    """One part (a list of arrays) per rank of this rank's image summaries: rank ``r`` gets the categories
    ``owners[k] == r`` (``owners`` None: ``k % world_size == r``).

    ``dets``: per metric, each image's detection count, a function giving
    every detection's score, every detection's category (``0`` for every one
    of ``'proposal'``, whose metrics ``proposal`` marks: all on rank 0), and a
    function giving their state words: each of those two columns is read,
    split and dropped in turn. A part holds the categories it is for, the
    images with a detection there (dataset position, image id), their
    detections of those categories, the non-ignored ground-truth counts of
    those categories (and of all, for ``'proposal'``), this rank's detection
    totals, for rank 0 every image's effective id (to warn of duplicates once), and last the images'
    ``digests`` (uint64, :func:`~mmeval.core.packed.summary_digests` of their summaries; ``None``: zeros),
    what ranks images sharing an id: 8 bytes an image in each part it is in.
    """
    n_img, n_rng = positions.shape[0], len(AREA_RANGES)
    if owners is None:
        owners = np.arange(k_all, dtype=np.int64) % max(world_size, 1)
    owners = np.asarray(owners, dtype=np.int64)
    if owners.shape != (k_all,) or (owners.size and not 0 <= int(owners.min()) <= int(owners.max()) < world_size):
        raise ValueError(f"COCODetection: owners of shape {owners.shape} for {k_all} categories and {world_size} ranks")
    owner_of = owners.astype(np.uint16 if world_size < 65536 else np.int64)
    own_of = [np.flatnonzero(owners == r) for r in range(world_size)]
    npig = np.zeros((k_all, n_rng), dtype=np.int64)
    for a in range(n_rng):
        counted = gt_cat[(gt_ig >> a) & 1 == 0]
        npig[:, a] = np.bincount(counted, minlength=k_all)[:k_all]
    totals = np.array([int(d[0].sum()) for d in dets], dtype=np.int64)
    eff = np.where(has_id, img_ids, positions).astype(np.int64)
    # per metric and rank: which detections go there (their places, rising; None: all) and each image's count of
    # them -- from one stable sort of the detections by owner and one count of (owner, image) pairs, so a column
    # is read once whatever the number of ranks (a mask per rank read it world_size times)
    chosen: List[List[Tuple[Optional[np.ndarray], np.ndarray]]] = []
    inc = np.zeros((world_size, n_img), dtype=bool)
    for j, (lens, _, cats, _) in enumerate(dets):
        per_rank: List[Tuple[Optional[np.ndarray], np.ndarray]]
        if world_size == 1 or (j < len(proposal) and proposal[j]):  # every detection on rank 0
            none = np.zeros(0, dtype=np.int64)
            per_rank = [(None, lens)] + [(none, lens * 0) for _ in range(1, world_size)]
        else:
            det_owner = owner_of[cats]
            key = det_owner.astype(np.int64)
            key *= n_img
            key += np.repeat(np.arange(n_img, dtype=np.int64), lens)
            counts = np.bincount(key, minlength=world_size * n_img).reshape(world_size, n_img)
            del key
            order = np.argsort(det_owner, kind="stable")
            del det_owner
            bounds = [0, *np.cumsum(counts.sum(axis=1)).tolist()]  # each rank's run in the order
            per_rank = [(order[bounds[r] : bounds[r + 1]], counts[r]) for r in range(world_size)]
        for r, (_, counts_r) in enumerate(per_rank):
            inc[r] |= counts_r > 0
        chosen.append(per_rank)
    parts: List[List[np.ndarray]] = [
        [
            np.array([r, world_size], dtype=np.int64),
            own_of[r],
            positions[inc[r]],
            img_ids[inc[r]].astype(np.int64),
            has_id[inc[r]].astype(np.uint8),
        ]
        for r in range(world_size)
    ]

    def split(column: np.ndarray, per_rank: List[Tuple[Optional[np.ndarray], np.ndarray]]) -> List[np.ndarray]:
        return [(column if places is None else column[places]).reshape(-1) for places, _ in per_rank]

    for (_, scores_of, cats, states_of), per_rank in zip(dets, chosen):
        n = cats.shape[0]
        scores = split(scores_of(), per_rank)  # each column read, split and dropped in turn
        words = states_of()
        states = split(words.reshape(n, words.size // n) if n else words, per_rank)
        del words
        for r, (cat_part, (_, counts)) in enumerate(zip(split(cats, per_rank), per_rank)):
            parts[r] += [counts[inc[r]].astype(np.uint32), scores[r], cat_part, states[r]]
        del scores, states
    for r in range(world_size):
        parts[r] += [
            npig[own_of[r]].reshape(-1),
            npig.sum(axis=0),
            totals,
            eff if r == 0 else np.zeros(0, dtype=np.int64),
            (np.zeros(n_img, dtype=np.uint64) if digests is None else np.asarray(digests, np.uint64))[inc[r]],
        ]
    return parts


def join_parts(parts: Sequence[List[Any]], n_metrics: int) -> JoinedPart:
    """The parts every rank sent to this one (:func:`split_summaries`), joined, the images in ranking order.

    Each detection column is written once, straight into its ranked place;
    a part's arrays are dropped from it as soon as they are copied.
    """
    count = 2 + 3 + 4 * n_metrics + 5
    if any(len(p) != count for p in parts):
        raise ValueError(
            f"COCODetection: a part holds {[len(p) for p in parts]} arrays, not {count} "
            "(ranks running different versions of mmeval?)"
        )

    def joined(i: int) -> np.ndarray:
        return np.concatenate([np.asarray(p[i]) for p in parts]) if len(parts) > 1 else np.asarray(parts[0][i])

    head = joined(0).reshape(-1, 2)
    own_cats = np.asarray(parts[0][1], dtype=np.int64)
    if any(not np.array_equal(np.asarray(p[1], dtype=np.int64), own_cats) for p in parts[1:]):
        raise ValueError(
            "COCODetection: the ranks sent parts for different categories (they dealt the categories "
            "differently: ranks running different versions of mmeval?)"
        )
    pos, ids, has_id = joined(2), joined(3), joined(4).astype(bool)
    digest = joined(5 + 4 * n_metrics + 4)
    # images in sorted image-id order (what pycocotools' stable sorts rank by); images sharing an id by what
    # they are (their summaries' digests: the same on any rank, in any order), then by dataset position
    order: Optional[np.ndarray] = np.lexsort((pos, digest, np.where(has_id, ids, pos)))
    assert order is not None
    if bool(np.all(order == np.arange(order.shape[0]))):
        order = None  # already so (one process, ids rising with the dataset)
    n_imgs = [len(p[2]) for p in parts]
    dets_of = []
    for j in range(n_metrics):
        c = 5 + 4 * j
        lens = joined(c).astype(np.int64)
        if order is None and len(parts) == 1:
            scores, cats, states = (np.asarray(parts[0][c + i]) for i in (1, 2, 3))
        else:
            ranked = lens if order is None else lens[order]
            start = np.empty_like(lens)  # each image's first place in the ranked columns
            start[order if order is not None else slice(None)] = np.cumsum(ranked) - ranked
            total = int(lens.sum())
            words = max((np.asarray(p[c + 3]).size // len(p[c + 1]) for p in parts if len(p[c + 1])), default=1)
            scores = np.empty(total, dtype=np.result_type(*[np.asarray(p[c + 1]).dtype for p in parts]))
            cats = np.empty(total, dtype=np.result_type(*[np.asarray(p[c + 2]).dtype for p in parts]))
            states = np.empty((total, words), dtype=np.uint64)
            first = 0
            for p, n_img in zip(parts, n_imgs):
                own = lens[first : first + n_img]
                src = (np.asarray(p[c + 1]), np.asarray(p[c + 2]), np.asarray(p[c + 3]).reshape(-1, words))
                at = 0  # a run of images at a time: the places computed take 24 bytes a detection of the run
                for lo, hi in runs(own.tolist(), JOIN_DETECTIONS):
                    n = int(own[lo:hi].sum())
                    run_lens = own[lo:hi]
                    dest = np.repeat(start[first + lo : first + hi] - (np.cumsum(run_lens) - run_lens), run_lens)
                    dest += np.arange(n, dtype=np.int64)
                    for to, column in zip((scores, cats, states), src):
                        to[dest] = column[at : at + n]
                    at += n
                del src
                if isinstance(p, list):
                    p[c + 1] = p[c + 2] = p[c + 3] = None  # copied: its memory goes
                first += n_img
            lens = ranked
        dets_of.append((lens, scores, cats, states.reshape(-1)))
    base = 5 + 4 * n_metrics
    n_rng = len(AREA_RANGES)
    npig_own = joined(base).reshape(len(parts), -1, n_rng).sum(axis=0)
    npig_all = joined(base + 1).reshape(len(parts), n_rng).sum(axis=0)
    dets = joined(base + 2).reshape(len(parts), n_metrics).sum(axis=0)  # every rank puts its totals in every part
    world_ids = joined(base + 3)
    duplicate = bool(world_ids.size) and np.unique(world_ids).size != world_ids.size
    return JoinedPart(int(head[0, 0]), own_cats, dets_of, npig_own, npig_all, dets, duplicate)

"""What the pose metrics share: normalised keypoint distances, PCK from hit counts, and their base class.

``calc_distances`` and ``distance_acc`` are MMEval 0.2.1's helpers (same names, arguments and
values). :class:`KeypointMetric` is the base of the pose metrics (``PCKAccuracy`` and its MPII /
JHMDB variants, ``KeypointAUC``, ``KeypointEndPointError``, ``KeypointNME``): it reads MMEval's
``add(predictions, groundtruths)`` lists of dicts, turns each sample's instances into per-sample
count / sum rows of the metric's declared state, and keeps MMEval's ``metric._results`` idiom
working for a state metric.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ...core.base_metric import BaseMetric
from ...core.errors import MetricArgumentError, MetricArgumentKeyError
from ...core.inputs import FloatInput, to_numpy
from ...core.state import MetricState, combine

__all__ = [
    "KeypointInstances",
    "KeypointMetric",
    "MetricArgumentKeyError",
    "calc_distances",
    "distance_acc",
    "pck_from_counts",
    "pck_hits",
    "per_sample_sums",
]


def calc_distances(preds: np.ndarray, gts: np.ndarray, mask: np.ndarray, norm_factor: np.ndarray) -> np.ndarray:
    """The normalised distances between predicted and ground-truth keypoints, (K, N) float32; -1 where not counted.

    Args:
        preds: predicted keypoints (N, K, D).
        gts: ground-truth keypoints (N, K, D).
        mask: (N, K) booleans, True where the keypoint is visible (counted).
        norm_factor: (N, D) or (N, 1) normalisation sizes. An instance with a
            size of exactly 0 in any column is not counted at all; a negative size
            counts as 1e6 (its distances become about 0), as in MMEval 0.2.1.

    The distance of a counted keypoint is the Euclidean norm of ``(pred - gt) /
    norm_factor``, computed in the inputs' precision and stored as float32 (so
    that thresholds compare exactly as MMEval's do). ``norm_factor`` is not
    modified (MMEval 0.2.1 wrote the 1e6 into the caller's array).
    """
    preds, gts = np.asarray(preds), np.asarray(gts)
    counted = np.array(mask, dtype=bool)
    norm = np.array(norm_factor, copy=True)
    counted[np.any(norm == 0, axis=1)] = False
    norm[norm <= 0] = 1e6
    out = np.full(counted.shape, -1, dtype=np.float32)
    out[counted] = np.linalg.norm(((preds - gts) / norm[:, None, :])[counted], axis=-1)
    return np.transpose(out)


def distance_acc(distances: np.ndarray, thr: float = 0.5) -> float:
    """The fraction of the counted distances (those not -1) below ``thr``; -1 when none is counted."""
    hit, counted = pck_hits(np.asarray(distances), thr)
    n = int(np.count_nonzero(counted))
    if n == 0:
        return -1
    return float(np.count_nonzero(hit) / n)


def pck_hits(distances: np.ndarray, thr: Any) -> Tuple[np.ndarray, np.ndarray]:
    """``(hit, counted)`` booleans of the same shape as ``distances`` (from :func:`calc_distances`, -1: not counted).

    ``hit`` is a counted distance strictly below ``thr``. ``thr`` is compared as
    given: a Python float against the float32 distances in float32, as MMEval's
    comparison does.
    """
    counted = distances != -1
    return counted & (distances < thr), counted


def pck_from_counts(hits: np.ndarray, valid: np.ndarray) -> Tuple[np.ndarray, float, int]:
    """MMEval's PCK from per-keypoint counts: ``(acc (K,), avg, cnt)``.

    ``acc[k]`` is ``hits[k] / valid[k]`` (-1 where ``valid[k]`` is 0), ``avg``
    the mean of the defined ``acc`` values (0 when none is), ``cnt`` how many
    are defined. The division and the mean are the ones MMEval makes on the
    same integers, so the values are equal to the last bit.
    """
    hits, valid = np.asarray(hits, dtype=np.int64), np.asarray(valid, dtype=np.int64)
    acc = np.full(valid.shape, -1.0)
    counted = valid > 0
    acc[counted] = hits[counted] / valid[counted]
    defined = acc[acc >= 0]
    cnt = int(defined.shape[0])
    return acc, float(defined.mean()) if cnt else 0.0, cnt


def per_sample_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sum per-instance ``values`` (N, ...) over each sample's instances: (B, ...) for ``counts`` (B,) summing to N.

    A sample with no instance gets zeros. Booleans are counted (int64).
    """
    values = np.asarray(values)
    if values.dtype == bool:
        values = values.astype(np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if values.shape[0] == counts.shape[0] and bool(np.all(counts == 1)):
        return values
    out = np.zeros((counts.shape[0],) + values.shape[1:], dtype=values.dtype)
    nonempty = np.flatnonzero(counts)
    if nonempty.size:
        starts = (np.cumsum(counts) - counts)[nonempty]
        out[nonempty] = np.add.reduceat(values, starts, axis=0)
    return out


def _compact(counts: np.ndarray) -> np.ndarray:
    """Non-negative integer rows in the smallest unsigned dtype that holds them (the rows a rank keeps)."""
    top = int(counts.max()) if counts.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.int64)


class KeypointInstances(NamedTuple):
    """One ``add()`` batch as arrays: every sample's instances stacked, and how many each sample has."""

    pred: np.ndarray  # (N, K, D)
    gt: np.ndarray  # (N, K, D)
    mask: np.ndarray  # (N, K) bool
    sizes: Dict[str, np.ndarray]  # ground-truth key -> (N, 1) or (N, D)
    counts: np.ndarray  # (B,) instances per sample

    @property
    def num_keypoints(self) -> int:
        return int(self.gt.shape[1])


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not np.isnan(float(value))


def check_real(value: Any, name: str, metric: str, accepted: str = "a number") -> Any:
    """``value`` when it is a real number (not a bool, not NaN), kept as given (its type decides how thresholds compare)."""
    if not _real(value):
        raise MetricArgumentError(f"{metric}: {name} must be {accepted}, got {value!r}")
    return value


def check_count(value: Any, name: str, metric: str, optional: bool = False) -> Optional[int]:
    """``value`` as a positive int (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        accepted = "a positive int" + (" or None" if optional else "")
        raise MetricArgumentError(f"{metric}: {name} must be {accepted}, got {value!r}")
    return int(value)


#: where a pose metric's coordinates may be NaN (checked by :func:`check_visible_finite`)
_INVALID_KEYPOINT = "the ground truth's 'mask' is False (an invalid keypoint: ignored); refused where it is True"


def check_visible_finite(name: str, i: int, pred: np.ndarray, gt: np.ndarray, mask: np.ndarray) -> None:
    """Refuse a NaN or infinite coordinate of a keypoint the mask marks visible (an invalid one, mask False, may hold
    anything: it is not counted)."""
    for arg, coords in (("predictions", pred), ("groundtruths", gt)):
        if coords.dtype.kind in "fc":
            bad = ~np.isfinite(coords).all(axis=-1) & mask
            if bad.any():
                at = tuple(int(v) for v in np.argwhere(bad)[0])
                raise MetricArgumentError(
                    f"{name}.add(): {arg}[{i}]['coords'] holds a NaN or infinite coordinate at (instance, keypoint) "
                    f"{at}, which groundtruths[{i}]['mask'] marks visible; mark an invalid keypoint with mask False "
                    f"(its coordinates, NaN included, are then ignored)"
                )


class KeypointMetric(BaseMetric):
    """Base of the pose metrics: MMEval's ``add(predictions, groundtruths)`` into per-sample state rows.

    ``add()`` takes two sequences of dicts, one pair per sample: a prediction
    ``{'coords': (n, K, D)}`` and a ground truth ``{'coords': (n, K, D), 'mask':
    (n, K), <size keys>: (n, 1) or (n, D)}`` (numpy arrays, lists or tensors; a
    sample may hold several instances, or none). A subclass declares its state
    (:meth:`_state_shapes`), names the ground-truth sizes it reads
    (:meth:`_size_keys`) and gives per-instance rows (:meth:`_instance_rows`),
    which this class sums per sample; ``compute_metric`` turns the reduced
    state into the result (:meth:`_result`). States whose shape involves the
    number of keypoints ``K`` are declared once ``K`` is known: from
    ``num_keypoints`` when given, else from the first :meth:`add`.

    MMEval's tests clear ``metric._results = []``, ``add()`` and then call
    ``metric.compute_metric(metric._results)``: here ``_results`` reads as a
    one-element list holding this rank's state so far, ``compute_metric``
    accepts it (and MMEval's per-sample ``(prediction, groundtruth)`` pairs), and
    assigning an empty list resets the metric.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs): NaN means
    #: an invalid keypoint where the ground truth's ``mask`` is False (ignored, as there), refused where it is True
    float_inputs: ClassVar[Dict[str, Any]] = {
        "predictions": FloatInput(finite=False, keys=("coords",), nan_where=_INVALID_KEYPOINT),
        "groundtruths": (
            FloatInput(finite=False, keys=("coords",), nan_where=_INVALID_KEYPOINT),
            FloatInput(skip_keys=("coords", "mask")),  # the sizes (bboxes, head_size, ...): finite
        ),
    }

    #: whether the declared state depends on the number of keypoints
    _needs_k = True

    def __init__(self, num_keypoints: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_keypoints: Optional[int] = check_count(num_keypoints, "num_keypoints", self.name, optional=True)

    def _declare(self) -> None:
        """Declare the state (once), when it does not depend on ``K`` or ``K`` is known."""
        if self._state_specs or (self._needs_k and self.num_keypoints is None):
            return
        for name, (shape, dtype) in self._state_shapes(self.num_keypoints or 0).items():
            self._declare_state(name, shape, dtype, "exact_sum" if dtype == "float64" else "sum")

    # -- to implement ----------------------------------------------------------

    def _state_shapes(self, k: int) -> Dict[str, Tuple[Tuple[int, ...], str]]:
        """name -> (per-sample shape, dtype) of every statistic, for ``k`` keypoints."""
        raise NotImplementedError

    def _size_keys(self) -> Dict[str, str]:
        """The ground-truth keys each sample must have beside 'coords' and 'mask': key -> 'one' or 'per_dim'."""
        return {}

    def _check_instances(self, inst: KeypointInstances) -> None:
        """Refuse a batch the metric cannot count (raise :class:`MetricArgumentError`)."""

    def _instance_rows(self, inst: KeypointInstances) -> Dict[str, np.ndarray]:
        """name -> per-instance values (N, *shape) of every statistic (booleans are counted)."""
        raise NotImplementedError

    def _result(self, state: MetricState) -> Dict[str, Any]:
        """The metric's result from the reduced state."""
        raise NotImplementedError

    # -- add -------------------------------------------------------------------

    def add(self, predictions: Sequence[Mapping[str, Any]], groundtruths: Sequence[Mapping[str, Any]]) -> None:
        """Add a batch: one prediction dict and one ground-truth dict per sample (see the class docstring).

        Raises :class:`~mmeval.core.errors.MetricArgumentError` naming the
        sample and the key on anything it cannot read, and keeps nothing of the
        batch.
        """
        inst = self._instances(predictions, groundtruths)
        if inst is None:
            return
        self._check_instances(inst)
        k = inst.num_keypoints
        if self._needs_k and self.num_keypoints is not None and k != self.num_keypoints:
            raise MetricArgumentError(
                f"{self.name}: the ground truths have {k} keypoints, but this metric counts {self.num_keypoints} "
                f"(num_keypoints, or the first add()): every sample needs the same keypoints; build a new metric "
                f"for another keypoint layout"
            )
        if self._needs_k and self.num_keypoints is None:
            self.num_keypoints = k
        self._declare()
        rows = {name: per_sample_sums(v, inst.counts) for name, v in self._instance_rows(inst).items()}
        self._add_rows(**{name: _compact(v) if v.dtype.kind in "iu" else v for name, v in rows.items()})

    def _instances(self, predictions: Any, groundtruths: Any) -> Optional[KeypointInstances]:
        """The batch's instances, checked; ``None`` for an empty batch."""
        name = self.name
        for arg, value in (("predictions", predictions), ("groundtruths", groundtruths)):
            if isinstance(value, Mapping) or not isinstance(value, Sequence):
                raise MetricArgumentError(
                    f"{name}.add(): {arg} must be a sequence (list) of dicts, one per sample, got {type(value).__name__}"
                )
        if len(predictions) != len(groundtruths):
            raise MetricArgumentError(
                f"{name}.add(): {len(predictions)} predictions but {len(groundtruths)} groundtruths: pass one of each "
                f"per sample"
            )
        if not len(predictions):
            return None
        sizes = self._size_keys()
        preds: List[np.ndarray] = []
        gts: List[np.ndarray] = []
        masks: List[np.ndarray] = []
        extra: Dict[str, List[np.ndarray]] = {key: [] for key in sizes}
        counts = np.zeros(len(predictions), dtype=np.int64)
        shape: Optional[Tuple[int, int]] = None
        for i, (p, g) in enumerate(zip(predictions, groundtruths)):
            for arg, d in (("predictions", p), ("groundtruths", g)):
                if not isinstance(d, Mapping):
                    raise MetricArgumentError(
                        f"{name}.add(): {arg}[{i}] must be a dict (with 'coords'), got {type(d).__name__}"
                    )
            pc = _field(p, "coords", f"predictions[{i}]", name)
            gc = _field(g, "coords", f"groundtruths[{i}]", name)
            if gc.ndim != 3 or pc.shape != gc.shape:
                raise MetricArgumentError(
                    f"{name}.add(): groundtruths[{i}]['coords'] must be (instances, keypoints, dims) and "
                    f"predictions[{i}]['coords'] the same shape, got {gc.shape} and {pc.shape}"
                )
            if shape is not None and gc.shape[1:] != shape:
                raise MetricArgumentError(
                    f"{name}.add(): groundtruths[{i}]['coords'] has (keypoints, dims) {gc.shape[1:]}, earlier samples "
                    f"{shape}: every sample needs the same keypoints"
                )
            shape = (int(gc.shape[1]), int(gc.shape[2]))
            n = int(gc.shape[0])
            mask = _field(g, "mask", f"groundtruths[{i}]", name)
            if mask.shape != gc.shape[:2]:
                raise MetricArgumentError(
                    f"{name}.add(): groundtruths[{i}]['mask'] must be (instances, keypoints) = {gc.shape[:2]}, "
                    f"got {mask.shape}"
                )
            if mask.dtype != bool:
                if not (np.issubdtype(mask.dtype, np.number) and np.all((mask == 0) | (mask == 1))):
                    raise MetricArgumentError(
                        f"{name}.add(): groundtruths[{i}]['mask'] must be booleans (True: visible), got {mask.dtype} "
                        f"values other than 0 and 1"
                    )
                mask = mask.astype(bool)
            check_visible_finite(name, i, pc, gc, mask)
            for key, columns in sizes.items():
                if key not in g:
                    raise MetricArgumentError(
                        f"{name}.add(): The ground truth data info do not have the expected normalized factor "
                        f"{key!r} (groundtruths[{i}] has {sorted(g)}): add it to every ground truth, or choose "
                        f"another norm_item"
                    )
                size = _field(g, key, f"groundtruths[{i}]", name)
                if size.shape == (n,):
                    size = size.reshape(n, 1)
                allowed = [(n, 1)] if columns == "one" else [(n, 1), (n, shape[1])]
                if size.shape not in allowed:
                    raise MetricArgumentError(
                        f"{name}.add(): groundtruths[{i}][{key!r}] must have shape {' or '.join(map(str, allowed))} "
                        f"(one row per instance), got {size.shape}"
                    )
                extra[key].append(size)
            preds.append(pc)
            gts.append(gc)
            masks.append(mask)
            counts[i] = n
        return KeypointInstances(
            np.concatenate(preds),
            np.concatenate(gts),
            np.concatenate(masks),
            {key: _stack(v) for key, v in extra.items()},
            counts,
        )

    # -- compute ---------------------------------------------------------------

    def compute(self, size: Optional[int] = None) -> Dict[str, Any]:
        if self._state_specs or not self._needs_k or self.num_keypoints is not None:
            return super().compute(size)
        # nothing added on this rank and K unknown: take the state path with empty statistics, so that a rank
        # which knows K and this one disagree on the question's num_keypoints (every rank raises, naming it)
        # rather than on which collective to call
        for name, (shape, dtype) in self._state_shapes(0).items():
            self._declare_state(name, shape, dtype, "exact_sum" if dtype == "float64" else "sum")
        try:
            return super().compute(size)
        finally:
            self._state_specs = []

    def compute_metric(self, results: Union[MetricState, Sequence[Any]]) -> Dict[str, Any]:
        """The metric from the reduced :class:`~mmeval.core.state.MetricState`.

        Also takes a list of such states (``metric._results``, see the class
        docstring) or MMEval's per-sample ``(prediction, groundtruth)`` pairs.
        """
        if not isinstance(results, MetricState):
            results = self._state_of(results)
        if not results.num_samples:
            raise ValueError(f"{self.name}.compute_metric: no results to compute on (nothing was added)")
        return self._result(results)

    def _state_of(self, results: Sequence[Any]) -> MetricState:
        items = list(results)
        if items and all(isinstance(r, MetricState) for r in items):
            state: MetricState = items[0]
            for more in items[1:]:
                state = combine(self._state_specs, state, more)
            return state
        if not all(isinstance(r, (tuple, list)) and len(r) == 2 for r in items):
            raise MetricArgumentError(
                f"{self.name}.compute_metric: results must be the reduced state, a list of states or "
                f"(prediction, groundtruth) pairs"
            )
        state = MetricState()
        inst = self._instances([p for p, _ in items], [g for _, g in items])
        if inst is None:
            return state
        self._check_instances(inst)
        for name, v in self._instance_rows(inst).items():
            v = np.asarray(v)
            state[name] = v.sum(axis=0, dtype=np.float64 if v.dtype.kind == "f" else np.int64)
        state.num_samples = len(items)
        return state

    @property
    def _results(self) -> List[Any]:
        """This rank's state so far, as a one-element list (MMEval's ``compute_metric(metric._results)``)."""
        if self._kept.objects:
            return self._kept.objects
        return [self._whole_state()]

    @_results.setter
    def _results(self, value: List[Any]) -> None:
        """``metric._results = []`` (MMEval's way of clearing) resets the metric."""
        if len(value):
            raise MetricArgumentError(f"{self.name}: _results can only be cleared (= []); add samples with add()")
        self.reset()


def _field(d: Mapping[str, Any], key: str, where: str, metric: str) -> np.ndarray:
    if key not in d:
        raise MetricArgumentError(f"{metric}.add(): {where} has no {key!r} (keys: {sorted(d)})")
    arr = to_numpy(d[key], f"{where}[{key!r}]")
    if arr.dtype != bool and not np.issubdtype(arr.dtype, np.number):
        raise MetricArgumentError(f"{metric}.add(): {where}[{key!r}] must be numbers, got dtype {arr.dtype}")
    return arr


def _stack(parts: List[np.ndarray]) -> np.ndarray:
    """Per-sample size arrays stacked; (n, 1) parts broadcast to (n, D) when others are (n, D)."""
    widths = {p.shape[1] for p in parts}
    if len(widths) > 1:
        width = max(widths)
        parts = [np.broadcast_to(p, (p.shape[0], width)) for p in parts]
    return np.concatenate(parts)

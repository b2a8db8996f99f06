"""Natural Image Quality Evaluator, a no-reference image quality score (MMEval's ``NaturalImageQualityEvaluator``).

Mittal, Soundararajan and Bovik, "Making a 'Completely Blind' Image Quality Analyzer" (2013): the
distance between a multivariate Gaussian fitted to an image's natural-scene-statistics features and
the one fitted to pristine images. The pristine model's parameters are data, not code, and are not
shipped here: :func:`load_pris_params` finds them (an argument, ``MMEVAL_NIQE_PRIS_PARAMS``, or an
installed basicsr, which ships them under the Apache-2.0 licence). Numpy only.
"""

from __future__ import annotations

import importlib.util
import math
import numbers
import os
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..core.errors import MetricArgumentError
from ..core.inputs import FINITE, FloatInput
from ._per_image import MeanOfImageScores, image_list
from .utils.image_transforms import CHANNEL_ORDERS, INPUT_ORDERS, reorder_and_crop

__all__ = ["NIQE_PARAMS_ENV", "NaturalImageQualityEvaluator", "aggd_fit", "load_pris_params", "matlab_half_resize"]

#: the environment variable naming the pristine-model parameter file (.npz)
NIQE_PARAMS_ENV = "MMEVAL_NIQE_PRIS_PARAMS"
#: the keys of the parameter file
_PARAM_KEYS = ("mu_pris_param", "cov_pris_param", "gaussian_window")
BLOCK = 96

PrisParams = Tuple[np.ndarray, np.ndarray, np.ndarray]


def _basicsr_params() -> Optional[str]:
    """The parameter file an installed basicsr ships (found without importing basicsr), or ``None``."""
    try:
        spec = importlib.util.find_spec("basicsr")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "metrics", "niqe_pris_params.npz")
        if os.path.isfile(path):
            return path
    return None


def load_pris_params(source: Union[str, "os.PathLike[str]", Mapping[str, Any], None] = None) -> PrisParams:
    """NIQE's pristine model: ``(mu (36,), cov (36, 36), gaussian_window (k, k))``.

    ``source``: a mapping with the keys ``mu_pris_param``, ``cov_pris_param`` and
    ``gaussian_window``, or the path of an ``.npz`` file holding them (the file MMEval 0.2.1 and
    basicsr ship, ``niqe_pris_params.npz``). ``None``: the file named by the environment variable
    ``MMEVAL_NIQE_PRIS_PARAMS``, else the one an installed basicsr ships. Raises
    ``FileNotFoundError`` saying where to get it when there is none, and
    :class:`~mmeval.core.errors.MetricArgumentError` for a file of the wrong shape.
    """
    if source is None:
        source = os.environ.get(NIQE_PARAMS_ENV) or _basicsr_params()
        if source is None:
            raise FileNotFoundError(
                "NaturalImageQualityEvaluator needs NIQE's pristine-model parameters (niqe_pris_params.npz: "
                "mu_pris_param, cov_pris_param, gaussian_window), which mmeval-core does not ship: pass "
                f"pris_params='path/to/niqe_pris_params.npz', set {NIQE_PARAMS_ENV} to that path, or install "
                "basicsr (Apache-2.0), which ships the file"
            )
    if isinstance(source, Mapping):
        data: Mapping[str, Any] = source
    else:
        with np.load(os.fspath(source), allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    missing = [k for k in _PARAM_KEYS if k not in data]
    if missing:
        raise MetricArgumentError(
            f"NIQE parameters {source if not isinstance(source, Mapping) else ''!s}: "
            f"missing {missing}; expected {list(_PARAM_KEYS)}"
        )
    mu = np.asarray(data["mu_pris_param"], dtype=np.float64).reshape(-1)
    cov = np.asarray(data["cov_pris_param"], dtype=np.float64)
    window = np.asarray(data["gaussian_window"], dtype=np.float64)
    if (
        mu.shape != (36,)
        or cov.shape != (36, 36)
        or window.ndim != 2
        or window.shape[0] % 2 == 0
        or window.shape[0] != window.shape[1]
    ):
        raise MetricArgumentError(
            f"NIQE parameters: expected mu_pris_param of 36 values, cov_pris_param 36 x 36 "
            f"and an odd square gaussian_window, got {mu.shape}, {cov.shape}, {window.shape}"
        )
    return mu, cov, window


# -- features -----------------------------------------------------------------------------------------------------


_SHAPES: Optional[Tuple[np.ndarray, np.ndarray]] = None


def _shape_table() -> Tuple[np.ndarray, np.ndarray]:
    """The AGGD shape candidates 0.2, 0.201, ..., 10 and their ``Gamma(2/a)^2 / (Gamma(1/a) Gamma(3/a))``."""
    global _SHAPES
    if _SHAPES is None:
        shapes = np.arange(0.2, 10.001, 0.001)
        inv = 1.0 / shapes
        gamma = np.vectorize(math.gamma, otypes=[np.float64])
        _SHAPES = shapes, gamma(inv * 2) ** 2 / (gamma(inv) * gamma(inv * 3))
    return _SHAPES


def aggd_fit(values: np.ndarray) -> Tuple[float, float, float]:
    """Fit an asymmetric generalised Gaussian to ``values``: ``(shape alpha, left scale, right scale)``.

    Moment matching (Lasmar et al., 2009): the shape is the candidate of :func:`_shape_table` whose
    ratio is nearest (the first among equals) to the sample's bias-corrected ``E|x|^2 / E[x^2]``.
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    left = math.sqrt(float(np.mean(x[x < 0] ** 2)))
    right = math.sqrt(float(np.mean(x[x > 0] ** 2)))
    g = left / right
    r = float(np.mean(np.abs(x))) ** 2 / float(np.mean(x * x))
    r_norm = r * (g**3 + 1) * (g + 1) / ((g**2 + 1) ** 2)
    shapes, ratios = _shape_table()
    alpha = float(shapes[int(np.argmin((ratios - r_norm) ** 2))])
    scale = math.sqrt(math.gamma(1 / alpha) / math.gamma(3 / alpha))
    return alpha, left * scale, right * scale


def _block_features(block: np.ndarray) -> List[float]:
    """The 18 features of one block of normalised coefficients: the AGGD of the block, then of its products
    with its neighbour along each of four orientations (shape, mean, left and right scales)."""
    alpha, b_left, b_right = aggd_fit(block)
    feats = [alpha, (b_left + b_right) / 2]
    for shift in ((0, 1), (1, 0), (1, 1), (1, -1)):
        alpha, b_left, b_right = aggd_fit(block * np.roll(block, shift, axis=(0, 1)))
        mean = (b_right - b_left) * math.gamma(2 / alpha) / math.gamma(1 / alpha)
        feats += [alpha, mean, b_left, b_right]
    return feats


def _convolve_nearest(img: np.ndarray, window: np.ndarray) -> np.ndarray:
    """The convolution of ``img`` with ``window`` (odd, square), the border extended by its nearest pixels.

    Accumulated one window tap at a time in raster order of the flipped window (scipy.ndimage's order),
    so that values near a tie in :func:`aggd_fit`'s nearest-candidate search fall the same way.
    """
    half = window.shape[0] // 2
    padded = np.pad(img, half, mode="edge")
    flipped = window[::-1, ::-1]
    h, w = img.shape
    acc = np.zeros(img.shape, dtype=np.float64)
    for i in range(window.shape[0]):
        for j in range(window.shape[1]):
            acc += padded[i : i + h, j : j + w] * flipped[i, j]
    return acc


def _cubic(x: np.ndarray) -> np.ndarray:
    """MATLAB's bicubic kernel (a = -0.5), in float32 as MATLAB's ``imresize`` port computes it."""
    ax = np.abs(np.asarray(x, dtype=np.float32))
    ax2, ax3 = ax * ax, ax * ax * ax
    near = (np.float32(1.5) * ax3 - np.float32(2.5) * ax2 + np.float32(1)) * (ax <= 1)
    far = (np.float32(-0.5) * ax3 + np.float32(2.5) * ax2 - np.float32(4) * ax + np.float32(2)) * ((1 < ax) & (ax <= 2))
    return np.asarray(near + far, dtype=np.float32)


def _half_taps(length: int) -> Tuple[np.ndarray, np.ndarray]:
    """Weights (out, k) and input indices (out, k) of MATLAB's antialiased bicubic resize by 1/2 of one axis."""
    scale, width = 0.5, 4.0 / 0.5
    out_len = math.ceil(length * scale)
    u = np.arange(1, out_len + 1, dtype=np.float32) / np.float32(scale) + np.float32(0.5 * (1 - 1 / scale))
    left = np.floor(u - np.float32(width / 2))
    idx = (left[:, None] + np.arange(math.ceil(width) + 2)).astype(np.int32)
    weights = np.float32(scale) * _cubic(np.float32(scale) * (u[:, None] - idx - 1))
    weights = weights / weights.sum(axis=1, keepdims=True)
    mirror = np.concatenate([np.arange(length), np.arange(length - 1, -1, -1)]).astype(np.int32)
    idx = mirror[np.mod(idx, mirror.size)]
    used = np.any(weights != 0, axis=0)
    return weights[:, used], idx[:, used]


def matlab_half_resize(img: np.ndarray) -> np.ndarray:
    """A 2-D image resized by 1/2 as MATLAB's ``imresize(img, 0.5)`` (bicubic, antialiased, mirrored borders).

    The output is ``ceil(H / 2) x ceil(W / 2)``; rows first, then columns, each pass in float32.
    """
    out = np.asarray(img, dtype=np.float64)
    for axis in (0, 1):
        weights, idx = _half_taps(out.shape[axis])
        src = out.astype(np.float32)
        moved = np.moveaxis(src, axis, 0)
        res = np.stack([(moved[idx[i]] * weights[i][:, None]).sum(axis=0) for i in range(weights.shape[0])])
        out = np.moveaxis(res, 0, axis).astype(np.float64)
    return out


def niqe_of_gray(img: np.ndarray, params: PrisParams) -> float:
    """NIQE of one rounded gray image (H, W) of [0, 255] values: 96 x 96 blocks (the rest cropped) at two scales."""
    mu_pris, cov_pris, window = params
    nh, nw = img.shape[0] // BLOCK, img.shape[1] // BLOCK
    work = img[: nh * BLOCK, : nw * BLOCK]
    per_scale = []
    for scale in (1, 2):
        mu = _convolve_nearest(work, window)
        sigma = np.sqrt(np.abs(_convolve_nearest(work * work, window) - mu * mu))
        mscn = (work - mu) / (sigma + 1)
        size = BLOCK // scale
        per_scale.append(
            np.array(
                [
                    _block_features(mscn[r * size : (r + 1) * size, c * size : (c + 1) * size])
                    for c in range(nw)
                    for r in range(nh)
                ]
            )
        )
        if scale == 1:
            work = matlab_half_resize(work / 255.0) * 255.0
    feats = np.concatenate(per_scale, axis=1)
    mu_img = np.nanmean(feats, axis=0)
    cov_img = np.cov(feats[~np.isnan(feats).any(axis=1)], rowvar=False)
    d = mu_pris - mu_img
    return float(np.sqrt(d @ np.linalg.pinv((cov_pris + cov_img) / 2) @ d))


class NaturalImageQualityEvaluator(MeanOfImageScores):
    """NIQE (lower is better) per image, averaged over images; MMEval 0.2.1's definition.

    Each image is converted to one channel (``convert_to``), rounded, cut
    into 96 x 96 blocks (the remainder dropped); 18 natural-scene-statistics
    features per block at full and half size (MATLAB's antialiased bicubic
    resize) make 36; NIQE is the Mahalanobis-like distance between their
    Gaussian and the pristine one.

    Args:
        crop_border: pixels left out at each edge (default 0).
        input_order: ``'CHW'`` (default) or ``'HWC'``.
        convert_to: ``'gray'`` (default) or ``'y'`` (BT.601 luma).
        channel_order: ``'rgb'`` (default) or ``'bgr'``.
        pris_params: the pristine model (not in MMEval, which shipped it):
            see :func:`load_pris_params`; ``None`` looks for
            ``MMEVAL_NIQE_PRIS_PARAMS`` or an installed basicsr.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, channel_order=None)``: a sequence of images (3-D in
    ``input_order``, [0, 255]) or videos (4-D, scored as the mean of their
    frames'); each must hold at least two 96 x 96 blocks after
    ``crop_border`` (e.g. 96 x 192). Result key
    ``niqe``. Numpy only (MMEval used scipy; the values agree to rounding).

    A state metric: the sum of the images' scores and their count move,
    whatever the number of images.

    Units: ``niqe`` is a distance (lower is better, no fixed range), as MMEval 0.2.1's.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": FINITE}

    KEY = "niqe"

    def __init__(
        self,
        crop_border: int = 0,
        input_order: str = "CHW",
        convert_to: str = "gray",
        channel_order: str = "rgb",
        pris_params: Union[str, "os.PathLike[str]", Mapping[str, Any], None] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(crop_border, bool) or not isinstance(crop_border, numbers.Integral) or crop_border < 0:
            raise MetricArgumentError(
                f"NaturalImageQualityEvaluator: crop_border must be a non-negative int, got {crop_border!r}"
            )
        if not isinstance(input_order, str) or input_order.upper() not in INPUT_ORDERS:
            raise MetricArgumentError(
                f"NaturalImageQualityEvaluator: input_order must be 'HWC' or 'CHW', got {input_order!r}"
            )
        if not isinstance(convert_to, str) or convert_to.lower() not in ("y", "gray"):
            raise MetricArgumentError(
                f"NaturalImageQualityEvaluator: convert_to must be 'y' or 'gray' (NIQE is "
                f"defined on one channel), got {convert_to!r}"
            )
        _order(channel_order)
        self.crop_border: int = int(crop_border)
        self.input_order: str = input_order.upper()
        self.convert_to: str = convert_to.lower()
        self.channel_order: str = channel_order
        self._params: PrisParams = load_pris_params(pris_params)

    def _question(self, size: Optional[int]) -> Dict[str, Any]:
        """The configuration, plus the pristine model's parameters themselves (ranks loading other files differ)."""
        question = super()._question(size)
        question["pris_params"] = tuple(np.asarray(p) for p in self._params)
        return question

    @property
    def mu_pris_param(self) -> np.ndarray:
        """The pristine model's feature mean, (1, 36) as MMEval's attribute."""
        return np.asarray(self._params[0][None])

    @property
    def cov_pris_param(self) -> np.ndarray:
        """The pristine model's feature covariance (36, 36)."""
        return self._params[1]

    @property
    def gaussian_window(self) -> np.ndarray:
        """The window of the local mean and deviation (7 x 7 in the published model)."""
        return self._params[2]

    def add(self, predictions: Any, channel_order: Optional[str] = None) -> None:
        """Add a batch of images or videos; see the class docstring. Keeps nothing of a batch it refuses."""
        order = _order(self.channel_order if channel_order is None else channel_order)
        scores = []
        for i, img in enumerate(image_list(predictions, "predictions")):
            if img.ndim not in (3, 4):
                raise MetricArgumentError(
                    f"NaturalImageQualityEvaluator.add(): image {i} must be 3-D (an image in "
                    f"{self.input_order}) or 4-D (a video), got shape {img.shape}"
                )
            frames = img if img.ndim == 4 else img[None]
            scores.append(float(np.mean([self.compute_niqe(frame, order, i) for frame in frames])))
        self._add_scores(scores)

    def compute_niqe(self, prediction: np.ndarray, channel_order: str, index: int = 0) -> float:
        """NIQE of one image (3-D, [0, 255]) after this metric's crop and conversion."""
        gray = np.round(
            reorder_and_crop(prediction, self.crop_border, self.input_order, self.convert_to, channel_order)[..., 0]
        )
        if (gray.shape[0] // BLOCK) * (gray.shape[1] // BLOCK) < 2:
            raise MetricArgumentError(
                f"NaturalImageQualityEvaluator: image {index} is {gray.shape[0]} x "
                f"{gray.shape[1]} after crop_border={self.crop_border}; NIQE needs at least two "
                f"{BLOCK} x {BLOCK} blocks (a covariance of one block is undefined), e.g. "
                f"{BLOCK} x {2 * BLOCK}"
            )
        return niqe_of_gray(gray, self._params)


def _order(value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in CHANNEL_ORDERS:
        raise MetricArgumentError(f"NaturalImageQualityEvaluator: channel_order must be 'rgb' or 'bgr', got {value!r}")
    return value.lower()

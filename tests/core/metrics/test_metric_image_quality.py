"""The image metrics (MMEval 0.2.1's image quality, matting and optical-flow family) against independent references.

References: scikit-image's ``peak_signal_noise_ratio``, ``structural_similarity`` and
``mean_squared_error`` where their definitions are MMEval's; elsewhere a plain loop written here
from the definition (the BT.601 luma, the SSIM window, the first-derivative-of-Gaussian filter, the
connectivity thresholds with a flood fill, MATLAB's bicubic resize, the AGGD moment match).
MMEval's documented numbers; bad arguments; the missing extra; the distributed result on hub ranks
under every sharding of the shared table; and compute()'s bytes, independent of the number of images.
"""

from __future__ import annotations

import importlib
import math
import os
import sys
from collections import deque
from typing import Any, Dict, List

import numpy as np
import pytest
from hub_backend import run_ranks

from mmeval.core.errors import MetricArgumentError, MissingExtraError
from mmeval.metrics import (
    ConnectivityError,
    EndPointError,
    GradientError,
    MattingMeanSquaredError,
    MeanAbsoluteError,
    MeanSquaredError,
    NaturalImageQualityEvaluator,
    PeakSignalNoiseRatio,
    SignalNoiseRatio,
    StructuralSimilarity,
    SumAbsoluteDifferences,
)

#: tests/, where the shared case table lives. It is put on sys.path only while importing from it: with
#: tests/ on the path, ``import torch`` where torch is not installed finds tests/torch (a namespace
#: package), and every ``pytest.importorskip("torch")`` of the process runs instead of skipping.
TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _from_tests(module: str) -> Any:
    saved = list(sys.path)
    sys.path.insert(0, TESTS)
    try:
        return importlib.import_module(module)
    finally:
        sys.path[:] = saved


_cases = _from_tests("metric_cases_image")
alpha_mattes, flows, image_pairs, niqe_params = (
    _cases.alpha_mattes,
    _cases.flows,
    _cases.image_pairs,
    _cases.niqe_params,
)

# -- references written from the definitions ------------------------------------------------------------------------


def ref_luma(img_hwc: np.ndarray, bgr: bool = False) -> np.ndarray:
    """BT.601 luma of an [0, 255] RGB (or BGR) image, pixel by pixel: 16 + (65.481 R + 128.553 G + 24.966 B) / 255."""
    out = np.empty(img_hwc.shape[:2])
    for y in range(img_hwc.shape[0]):
        for x in range(img_hwc.shape[1]):
            c0, c1, c2 = (float(v) / 255.0 for v in img_hwc[y, x])
            r, g, b = (c2, c1, c0) if bgr else (c0, c1, c2)
            out[y, x] = 16.0 + 65.481 * r + 128.553 * g + 24.966 * b
    return out


def ref_ssim_channel(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two (H, W) channels, window by window: an 11 x 11 Gaussian (sigma 1.5) wholly inside the image."""
    taps = [math.exp(-((k - 5) ** 2) / (2 * 1.5**2)) for k in range(11)]
    total = sum(taps)
    w = [[ti * tj / total**2 for tj in taps] for ti in taps]
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    values = []
    for y in range(a.shape[0] - 10):
        for x in range(a.shape[1] - 10):
            ma = mb = saa = sbb = sab = 0.0
            for i in range(11):
                for j in range(11):
                    p, q, wij = float(a[y + i, x + j]), float(b[y + i, x + j]), w[i][j]
                    ma, mb = ma + wij * p, mb + wij * q
                    saa, sbb, sab = saa + wij * p * p, sbb + wij * q * q, sab + wij * p * q
            va, vb, cov = saa - ma * ma, sbb - mb * mb, sab - ma * mb
            values.append((2 * ma * mb + c1) * (2 * cov + c2) / ((ma * ma + mb * mb + c1) * (va + vb + c2)))
    return sum(values) / len(values)


def ref_gauss_gradient(img: np.ndarray, sigma: float) -> np.ndarray:
    """Gradient magnitude by the MATLAB gaussgradient recipe: a 2-D filter G(i) * dG(j) normalised to unit L2
    norm (and its transpose), correlated pixel by pixel with the border replicated (clamped indices)."""
    half = math.ceil(sigma * math.sqrt(-2 * math.log(math.sqrt(2 * math.pi) * sigma * 1e-2)))
    size = 2 * half + 1

    def gauss(x: float) -> float:
        return math.exp(-x * x / (2 * sigma * sigma)) / (sigma * math.sqrt(2 * math.pi))

    fx = [[gauss(i - half) * (-(j - half) * gauss(j - half) / sigma**2) for j in range(size)] for i in range(size)]
    norm = math.sqrt(sum(v * v for row in fx for v in row))
    fx = [[v / norm for v in row] for row in fx]
    h, w = img.shape
    out = np.empty(img.shape)
    for y in range(h):
        for x in range(w):
            gx = gy = 0.0
            for i in range(size):
                for j in range(size):
                    p = float(img[min(max(y + i - half, 0), h - 1), min(max(x + j - half, 0), w - 1)])
                    gx += fx[i][j] * p
                    gy += fx[j][i] * p
            out[y, x] = math.sqrt(gx * gx + gy * gy)
    return out


def ref_gradient_error(pred: np.ndarray, gt: np.ndarray, trimap: np.ndarray, sigma: float = 1.4) -> float:
    def scaled(a: np.ndarray) -> np.ndarray:
        lo, hi = a.min(), a.max()
        return (a - lo) / (hi - lo) if hi > lo else np.zeros_like(a)

    d = ref_gauss_gradient(scaled(gt), sigma) - ref_gauss_gradient(scaled(pred), sigma)
    return sum(float(d[y, x]) ** 2 for y, x in zip(*np.nonzero(trimap == 128))) / 1000


def ref_largest_component(mask: np.ndarray) -> np.ndarray:
    """The largest 4-connected component of ``mask`` by flood fill (the first found in raster order among ties)."""
    h, w = mask.shape
    seen = np.zeros(mask.shape, bool)
    best: List[Any] = []
    for y in range(h):
        for x in range(w):
            if mask[y, x] and not seen[y, x]:
                comp, todo = [], deque([(y, x)])
                seen[y, x] = True
                while todo:
                    cy, cx = todo.popleft()
                    comp.append((cy, cx))
                    for ny, nx in ((cy - 1, cx), (cy + 1, cx), (cy, cx - 1), (cy, cx + 1)):
                        if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                            seen[ny, nx] = True
                            todo.append((ny, nx))
                if len(comp) > len(best):
                    best = comp
    out = np.zeros(mask.shape, bool)
    for y, x in best:
        out[y, x] = True
    return out


def ref_connectivity_error(pred: np.ndarray, gt: np.ndarray, trimap: np.ndarray, step: float = 0.1) -> float:
    """Rhemann et al.'s connectivity: per pixel the last threshold (0, step, ..., 1) at which it stays in the
    largest connected region of both mattes, then phi = 1 - d [d >= 0.15] for d = alpha - that level."""
    thresholds = [k * step for k in range(round(1 / step) + 1)]
    level = np.full(gt.shape, -1.0)
    for k in range(1, len(thresholds)):
        source = ref_largest_component((gt >= thresholds[k]) & (pred >= thresholds[k]))
        for y in range(gt.shape[0]):
            for x in range(gt.shape[1]):
                if level[y, x] == -1 and not source[y, x]:
                    level[y, x] = thresholds[k - 1]
    level[level == -1] = 1.0
    total = 0.0
    for y, x in zip(*np.nonzero(trimap == 128)):
        dg, dp = gt[y, x] - level[y, x], pred[y, x] - level[y, x]
        total += abs((1 - dg * (dg >= 0.15)) - (1 - dp * (dp >= 0.15)))
    return total / 1000


# -- image quality: PSNR, SNR, SSIM, MSE, MAE -----------------------------------------------------------------------


def test_psnr_equals_scikit_image_in_every_layout():
    metrics = pytest.importorskip("skimage.metrics")
    preds, gts = image_pairs(9, (16, 16, 3), seed=11)
    want = np.mean([metrics.peak_signal_noise_ratio(g, p, data_range=255) for p, g in zip(preds, gts)])
    assert PeakSignalNoiseRatio(input_order="HWC")(preds, gts)["psnr"] == pytest.approx(want, rel=1e-12)
    chw = PeakSignalNoiseRatio(input_order="CHW")(list(preds.transpose(0, 3, 1, 2)), list(gts.transpose(0, 3, 1, 2)))
    assert chw["psnr"] == pytest.approx(want, rel=1e-12)
    cropped = np.mean(
        [metrics.peak_signal_noise_ratio(g[3:-3, 3:-3], p[3:-3, 3:-3], data_range=255) for p, g in zip(preds, gts)]
    )
    assert PeakSignalNoiseRatio(crop_border=3, input_order="HWC")(preds, gts)["psnr"] == pytest.approx(
        cropped, rel=1e-12
    )
    # a video (T, C, H, W): the mean of its frames' PSNRs
    video = PeakSignalNoiseRatio()([preds[:3].transpose(0, 3, 1, 2)], [gts[:3].transpose(0, 3, 1, 2)])
    frames = np.mean([metrics.peak_signal_noise_ratio(g, p, data_range=255) for p, g in zip(preds[:3], gts[:3])])
    assert video["psnr"] == pytest.approx(frames, rel=1e-12)


@pytest.mark.parametrize("order", ["rgb", "bgr"])
def test_psnr_and_snr_on_the_y_channel_equal_a_bt601_loop(order):
    preds, gts = image_pairs(4, (16, 16, 3), seed=12)
    psnr, snr = [], []
    for p, g in zip(preds, gts):
        yp, yg = ref_luma(p, order == "bgr"), ref_luma(g, order == "bgr")
        mse = float(np.mean((yg - yp) ** 2))
        psnr.append(20 * math.log10(255 / math.sqrt(mse)))
        snr.append(10 * math.log10(float(np.mean(yg**2)) / mse))
    kw = {"input_order": "HWC", "convert_to": "Y", "channel_order": order}
    # the luma goes through float32 as in MMEval 0.2.1: equal to float32 precision
    assert PeakSignalNoiseRatio(**kw)(preds, gts)["psnr"] == pytest.approx(np.mean(psnr), rel=1e-6)
    assert SignalNoiseRatio(**kw)(preds, gts)["snr"] == pytest.approx(np.mean(snr), rel=1e-6)
    # add()'s channel_order overrides the constructor's for its batch
    other = SignalNoiseRatio(input_order="HWC", convert_to="Y", channel_order="bgr" if order == "rgb" else "rgb")
    other.add(preds, gts, channel_order=order)
    assert other.compute()["snr"] == pytest.approx(np.mean(snr), rel=1e-6)


def test_snr_equals_its_definition_loop():
    preds, gts = image_pairs(6, (3, 16, 16), seed=13)
    want = []
    for p, g in zip(preds, gts):
        signal = sum(float(v) ** 2 for v in g.reshape(-1)) / g.size
        noise = sum((float(a) - float(b)) ** 2 for a, b in zip(g.reshape(-1), p.reshape(-1))) / g.size
        want.append(10 * math.log10(signal / noise))
    assert SignalNoiseRatio()(preds, gts)["snr"] == pytest.approx(np.mean(want), rel=1e-12)


def test_ssim_equals_scikit_image_with_the_papers_window():
    metrics = pytest.importorskip("skimage.metrics")
    preds, gts = image_pairs(6, (16, 20, 3), seed=14)
    # scikit-image's Gaussian-weighted, population-covariance SSIM is the paper's (and MMEval's) definition
    want = np.mean(
        [
            metrics.structural_similarity(
                g.astype(float),
                p.astype(float),
                gaussian_weights=True,
                sigma=1.5,
                use_sample_covariance=False,
                data_range=255,
                channel_axis=-1,
            )
            for p, g in zip(preds, gts)
        ]
    )
    assert StructuralSimilarity(input_order="HWC")(preds, gts)["ssim"] == pytest.approx(want, rel=1e-9)


def test_ssim_equals_a_window_by_window_loop():
    preds, gts = image_pairs(2, (13, 14), seed=15)
    want = np.mean([ref_ssim_channel(g, p) for p, g in zip(preds, gts)])
    assert StructuralSimilarity()(preds, gts)["ssim"] == pytest.approx(want, rel=1e-10)


def test_mse_equals_scikit_image_and_masks_weight_pixels():
    metrics = pytest.importorskip("skimage.metrics")
    preds, gts = image_pairs(7, (16, 16, 3), seed=16)
    want = np.mean([metrics.mean_squared_error(g / 255.0, p / 255.0) for p, g in zip(preds, gts)])
    assert MeanSquaredError()(preds, gts)["mse"] == pytest.approx(want, rel=1e-12)


def test_mae_and_mse_with_masks_equal_their_definition_loops():
    preds, gts = image_pairs(5, (8, 8, 3), seed=17)
    masks = np.random.default_rng(0).random((5, 8, 8, 1)) * 2
    mae, mse = [], []
    for p, g, m in zip(preds, gts, masks):
        num_a = num_s = den = 0.0
        for y in range(8):
            for x in range(8):
                for c in range(3):
                    d = float(g[y, x, c]) / 255 - float(p[y, x, c]) / 255
                    num_a += abs(d) * m[y, x, 0]
                    num_s += d * d * m[y, x, 0]
                den += m[y, x, 0]
        mae.append(num_a / (den * 3 + 1e-12))  # MMEval's MAE: a channel-less mask counts each channel
        mse.append(num_s / den)  # its MSE does not
    assert MeanAbsoluteError()(preds, gts, masks)["mae"] == pytest.approx(np.mean(mae), rel=1e-12)
    assert MeanSquaredError()(preds, gts, masks)["mse"] == pytest.approx(np.mean(mse), rel=1e-12)
    # a video with a mask: the mean of its frames' masked errors
    video = MeanAbsoluteError()([preds], [gts], [masks])["mae"]
    assert video == pytest.approx(np.mean(mae), rel=1e-12)


def test_mmeval_documented_numbers():
    ones, twos = np.ones((32, 32, 3)), np.ones((32, 32, 3)) * 2
    assert PeakSignalNoiseRatio.compute_psnr(np.ones((32, 32)), np.ones((32, 32)) * 2) == pytest.approx(
        48.1308036086791
    )
    assert PeakSignalNoiseRatio(input_order="HWC", convert_to="Y")([ones], [twos])["psnr"] == pytest.approx(
        49.45272242415597, abs=1e-7
    )
    assert SignalNoiseRatio.compute_snr(np.ones((3, 32, 32)), np.ones((3, 32, 32)) * 2) == pytest.approx(
        6.020599913279624, rel=1e-14
    )
    assert SignalNoiseRatio(input_order="HWC", convert_to="Y")([ones], [twos])["snr"] == pytest.approx(
        26.290039980499536, abs=1e-7
    )
    assert StructuralSimilarity.compute_ssim(np.ones((32, 32)) * 2, np.ones((32, 32))) == pytest.approx(
        0.913062377743969, rel=1e-12
    )
    assert StructuralSimilarity(input_order="HWC", convert_to="Y")([ones], [twos])["ssim"] == pytest.approx(
        0.9987801, abs=1e-7
    )
    mask = np.ones((32, 32, 3)) * 2
    mask[:16] = 0
    assert MeanAbsoluteError.compute_mae(ones, twos, mask) == pytest.approx(0.003921568627, abs=1e-12)
    assert MeanSquaredError.compute_mse(ones, twos, mask) == pytest.approx(0.000015378700496, abs=1e-14)
    predictions = np.array([[[10.0, 5.0], [0.1, 3.0]], [[3.0, 15.2], [2.4, 4.5]]])
    labels = np.array([[[10.1, 4.8], [10, 3.0]], [[6.0, 10.2], [2.0, 4.1]]])
    assert EndPointError()(predictions, labels, np.array([[1.0, 1.0], [1.0, 0.0]]))["EPE"] == pytest.approx(
        5.318186230865093, rel=1e-14
    )
    assert PeakSignalNoiseRatio()([np.ones((32, 32))], [np.ones((32, 32))])["psnr"] == float("inf")


# -- matting: SAD, MattingMSE, GradientError, ConnectivityError -------------------------------------------------------


def test_sad_and_matting_mse_equal_their_definitions_without_uint8_wraparound():
    pa, ga, tri = alpha_mattes(6, 12, seed=21)
    sad = [sum(abs(float(a) - float(b)) for a, b in zip(p.reshape(-1), g.reshape(-1))) / 1000 for p, g in zip(pa, ga)]
    assert SumAbsoluteDifferences()(pa, ga)["sad"] == pytest.approx(np.mean(sad), rel=1e-12)
    mse = []
    for p, g, t in zip(pa, ga, tri):
        unknown = sum(1 for v in t.reshape(-1) if v == 128)
        total = sum((float(a) - float(b)) ** 2 for a, b in zip(p.reshape(-1), g.reshape(-1)))
        mse.append(total / unknown if unknown else 0.0)
    assert MattingMeanSquaredError()(pa, ga, tri)["matting_mse"] == pytest.approx(np.mean(mse), rel=1e-12)
    # uint8 inputs: 0 against 255 is a difference of 255 here (MMEval 0.2.1 subtracted in uint8: 1)
    black, white = np.zeros((1, 32, 32), np.uint8), np.full((1, 32, 32), 255, np.uint8)
    assert SumAbsoluteDifferences()(black, white)["sad"] == pytest.approx(255 * 32 * 32 / 1000)
    trimap = np.zeros((1, 32, 32), np.uint8)
    trimap[:, :16, :16] = 128
    assert MattingMeanSquaredError()(black, white, trimap)["matting_mse"] == pytest.approx(255**2 * 1024 / 256)
    # no unknown pixel: 0
    assert MattingMeanSquaredError()(black, white, np.zeros_like(trimap))["matting_mse"] == 0.0


def test_gradient_error_equals_the_gaussgradient_loop():
    pa, ga, tri = alpha_mattes(3, 12, seed=22)
    want = np.mean([ref_gradient_error(p, g, t) for p, g, t in zip(pa, ga, tri)])
    assert GradientError()(pa, ga, tri)["gradient_error"] == pytest.approx(want, rel=1e-10)
    want_s = np.mean([ref_gradient_error(p, g, t, sigma=0.8) for p, g, t in zip(pa[:1], ga[:1], tri[:1])])
    assert GradientError(sigma=0.8)(pa[:1], ga[:1], tri[:1])["gradient_error"] == pytest.approx(want_s, rel=1e-10)


def test_gradient_error_equals_opencv_filtering_of_float_mattes():
    cv2 = pytest.importorskip("cv2")
    pa, ga, tri = alpha_mattes(4, 16, seed=23)
    half = math.ceil(1.4 * math.sqrt(-2 * math.log(math.sqrt(2 * math.pi) * 1.4 * 1e-2)))
    x = np.arange(-half, half + 1.0)
    g = np.exp(-x * x / (2 * 1.4**2))
    kx = np.outer(g, -x * g)
    kx /= np.linalg.norm(kx)

    def grad(a: np.ndarray) -> np.ndarray:
        norm = cv2.normalize(a, None, 1.0, 0.0, cv2.NORM_MINMAX)
        fx = cv2.filter2D(norm, -1, kx, borderType=cv2.BORDER_REPLICATE)
        fy = cv2.filter2D(norm, -1, kx.T, borderType=cv2.BORDER_REPLICATE)
        return np.sqrt(fx**2 + fy**2)

    want = np.mean([((grad(gt) - grad(p)) ** 2 * (t == 128)).sum() / 1000 for p, gt, t in zip(pa, ga, tri)])
    assert GradientError()(pa, ga, tri)["gradient_error"] == pytest.approx(want, rel=1e-9)


def test_connectivity_error_equals_the_threshold_loop_with_a_flood_fill():
    pytest.importorskip("scipy")
    pa, ga, tri = alpha_mattes(4, 12, seed=24)
    for step in (0.1, 0.25):
        want = np.mean([ref_connectivity_error(p, g, t, step) for p, g, t in zip(pa, ga, tri)])
        got = ConnectivityError(step=step)(pa, ga, tri)["connectivity_error"]
        assert got == pytest.approx(want, rel=1e-12), step


def test_connectivity_error_without_scipy_names_the_extra(monkeypatch):
    pa, ga, tri = alpha_mattes(1, 8, seed=25)
    metric = ConnectivityError()
    for name in ("scipy", "scipy.ndimage"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError, match=r"ConnectivityError.*mmeval-core\[scipy\]"):
        metric.add(pa, ga, tri)
    assert metric.num_results == 0


# -- optical flow ---------------------------------------------------------------------------------------------------


def test_end_point_error_is_the_mean_over_valid_pixels():
    fp, fl, fm = flows(5, 6, seed=31)
    fm[2] = 0.0  # a map without a valid pixel adds nothing
    errors = [
        math.hypot(*(fp[i, y, x] - fl[i, y, x]))
        for i in range(5)
        for y in range(6)
        for x in range(6)
        if fm[i, y, x] >= 0.5
    ]
    assert EndPointError()(fp, fl, fm)["EPE"] == pytest.approx(sum(errors) / len(errors), rel=1e-12)
    everything = [math.hypot(*(fp[i, y, x] - fl[i, y, x])) for i in range(5) for y in range(6) for x in range(6)]
    assert EndPointError()(list(fp), list(fl))["EPE"] == pytest.approx(np.mean(everything), rel=1e-12)
    # MMEval's per-map results (mean, valid pixels) through compute_metric
    assert EndPointError().compute_metric([(np.array([2.0]), 3), (np.array([4.0]), 1)])["EPE"] == 2.5


# -- NIQE -----------------------------------------------------------------------------------------------------------


def ref_aggd(values: np.ndarray) -> Any:
    """The AGGD moment match by brute force over the candidate shapes 0.2, 0.201, ..., 10 (scipy's gamma)."""
    gamma = pytest.importorskip("scipy.special").gamma
    x = values.reshape(-1)
    left = math.sqrt(np.mean(x[x < 0] ** 2))
    right = math.sqrt(np.mean(x[x > 0] ** 2))
    g = left / right
    r = np.mean(np.abs(x)) ** 2 / np.mean(x**2)
    target = r * (g**3 + 1) * (g + 1) / (g**2 + 1) ** 2
    best, best_d = None, None
    for k in range(9801):
        a = 0.2 + 0.001 * k
        ratio = gamma(2 / a) ** 2 / (gamma(1 / a) * gamma(3 / a))
        if best_d is None or (ratio - target) ** 2 < best_d:
            best, best_d = a, (ratio - target) ** 2
    return (
        best,
        left * math.sqrt(gamma(1 / best) / gamma(3 / best)),
        right * math.sqrt(gamma(1 / best) / gamma(3 / best)),
    )


def ref_matlab_half(img: np.ndarray) -> np.ndarray:
    """MATLAB's imresize(img, 0.5, 'bicubic') with antialiasing, output pixel by output pixel: the cubic kernel
    (a = -0.5) stretched by 2, centred on 2 * i - 0.5 (1-based), weights normalised, the border mirrored."""

    def cubic(t: float) -> float:
        t = abs(t)
        if t <= 1:
            return 1.5 * t**3 - 2.5 * t**2 + 1
        return -0.5 * t**3 + 2.5 * t**2 - 4 * t + 2 if t <= 2 else 0.0

    def axis(a: np.ndarray) -> np.ndarray:
        n = a.shape[0]
        out = []
        for i in range(1, math.ceil(n / 2) + 1):
            u = 2 * i - 0.5
            taps = [(j, 0.5 * cubic(0.5 * (u - j))) for j in range(math.floor(u - 4), math.floor(u - 4) + 10)]
            total = sum(w for _, w in taps)
            acc = np.zeros(a.shape[1:])
            for j, w in taps:
                k = j - 1
                k = -k - 1 if k < 0 else (2 * n - k - 1 if k >= n else k)
                acc = acc + w / total * a[k]
            out.append(acc)
        return np.array(out)

    return axis(axis(img).T).T


def test_niqe_pieces_equal_their_definitions():
    rng = np.random.default_rng(41)
    block = rng.laplace(0, 1, (48, 48)) * np.where(rng.random((48, 48)) < 0.5, 0.6, 1.3)
    from mmeval.metrics.niqe import aggd_fit, matlab_half_resize

    assert np.allclose(aggd_fit(block), ref_aggd(block), rtol=1e-12)
    img = rng.random((21, 18)) * 255
    assert np.allclose(matlab_half_resize(img), ref_matlab_half(img), rtol=1e-5, atol=1e-4)  # float32 passes


def test_niqe_equals_the_reference_pipeline_with_a_given_model(tmp_path):
    ndimage = pytest.importorskip("scipy.ndimage")
    params = niqe_params()
    imgs, _ = image_pairs(1, (96, 192, 3), seed=42)
    # the gray definition written out term by term: a float32 `@` goes through BLAS, whose kernel (chosen by
    # the CPU: OPENBLAS_CORETYPE) rounds the sum differently, and np.round then flips pixels at .5
    unit = imgs[0].astype(np.float32) / np.float32(255)
    weights = np.array([0.299, 0.587, 0.114], np.float32)
    luma = unit[..., 0] * weights[0] + unit[..., 1] * weights[1] + unit[..., 2] * weights[2]
    gray = np.round(luma * np.float32(255)).astype(np.float64)
    work, feats = gray, []
    for scale in (1, 2):
        mu = ndimage.convolve(work, params["gaussian_window"], mode="nearest")
        sigma = np.sqrt(np.abs(ndimage.convolve(work * work, params["gaussian_window"], mode="nearest") - mu * mu))
        mscn = (work - mu) / (sigma + 1)
        size = 96 // scale
        rows = []
        for c in range(2):
            block = mscn[:, c * size : (c + 1) * size]
            a, bl, br = ref_aggd(block)
            row = [a, (bl + br) / 2]
            for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
                shifted = np.roll(np.roll(block, dy, axis=0), dx, axis=1)
                a, bl, br = ref_aggd(block * shifted)
                row += [a, (br - bl) * math.gamma(2 / a) / math.gamma(1 / a), bl, br]
            rows.append(row)
        feats.append(np.array(rows))
        work = ref_matlab_half(work / 255) * 255
    f = np.concatenate(feats, axis=1)
    d = params["mu_pris_param"][0] - f.mean(axis=0)
    want = math.sqrt(d @ np.linalg.pinv((params["cov_pris_param"] + np.cov(f, rowvar=False)) / 2) @ d)
    metric = NaturalImageQualityEvaluator(input_order="HWC", pris_params=params)
    assert metric(imgs)["niqe"] == pytest.approx(want, rel=1e-6)
    # the same model from a file, by argument and by MMEVAL_NIQE_PRIS_PARAMS
    path = tmp_path / "niqe_pris_params.npz"
    np.savez(path, **params)
    assert NaturalImageQualityEvaluator(input_order="HWC", pris_params=str(path))(imgs) == metric(imgs)
    os.environ["MMEVAL_NIQE_PRIS_PARAMS"] = str(path)  # the autouse fixture removes MMEVAL_* variables
    try:
        assert NaturalImageQualityEvaluator(input_order="HWC")(imgs) == metric(imgs)
    finally:
        del os.environ["MMEVAL_NIQE_PRIS_PARAMS"]


def test_niqe_finds_the_file_an_installed_basicsr_ships_and_says_where_to_get_one(tmp_path, monkeypatch):
    from mmeval.metrics import niqe

    monkeypatch.setattr(niqe, "_basicsr_params", lambda: None)  # whatever this environment has installed
    with pytest.raises(FileNotFoundError, match=r"pris_params=.*MMEVAL_NIQE_PRIS_PARAMS.*basicsr"):
        NaturalImageQualityEvaluator()
    monkeypatch.undo()
    package = tmp_path / "basicsr"
    (package / "metrics").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('basicsr must not be imported')\n")
    np.savez(package / "metrics" / "niqe_pris_params.npz", **niqe_params())
    monkeypatch.syspath_prepend(str(tmp_path))
    metric = NaturalImageQualityEvaluator()
    assert np.array_equal(metric.cov_pris_param, niqe_params()["cov_pris_param"])
    assert metric.mu_pris_param.shape == (1, 36) and metric.gaussian_window.shape == (7, 7)


# -- arguments and inputs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,kwargs,match",
    [
        (PeakSignalNoiseRatio, {"input_order": "HH"}, "input_order"),
        (PeakSignalNoiseRatio, {"convert_to": "ABC"}, "convert_to"),
        (PeakSignalNoiseRatio, {"convert_to": "y", "channel_order": "qwe"}, "channel_order"),
        (PeakSignalNoiseRatio, {"crop_border": -1}, "crop_border"),
        (SignalNoiseRatio, {"crop_border": 1.5}, "crop_border"),
        (StructuralSimilarity, {"input_order": "HWC", "convert_to": "Z"}, "convert_to"),
        (SumAbsoluteDifferences, {"norm_const": 0}, "norm_const"),
        (GradientError, {"sigma": -1.0}, "sigma"),
        (GradientError, {"norm_const": float("nan")}, "norm_const"),
        (ConnectivityError, {"step": 0}, "step"),
        (ConnectivityError, {"step": 1.5}, "step"),
        (NaturalImageQualityEvaluator, {"convert_to": "a"}, "convert_to"),
        (NaturalImageQualityEvaluator, {"input_order": "WHC"}, "input_order"),
        (NaturalImageQualityEvaluator, {"channel_order": "xyz"}, "channel_order"),
    ],
)
def test_bad_arguments_raise_metric_argument_errors_naming_them(cls, kwargs, match):
    with pytest.raises(MetricArgumentError, match=match) as info:
        cls(**kwargs)
    assert isinstance(info.value, AssertionError) and isinstance(info.value, ValueError)  # MMEval asserted


def test_bad_inputs_are_refused_naming_the_image_and_keep_nothing():
    preds, gts = image_pairs(3, (16, 16, 3), seed=51)
    cases = [
        (PeakSignalNoiseRatio(input_order="HWC"), (preds, gts[:, :8]), "image 0 has different shapes"),
        (MeanAbsoluteError(), (preds, gts[:2]), "different numbers of images"),
        (MeanSquaredError(), (preds, gts, np.ones((3, 5, 5, 1))), "does not broadcast"),
        (StructuralSimilarity(crop_border=3, input_order="HWC"), (preds, gts), "at least 11 x 11"),
        (PeakSignalNoiseRatio(crop_border=8, input_order="HWC"), (preds, gts), "leaves nothing"),
        (EndPointError(), (preds, gts), "last axis of 2"),
        (GradientError(), (preds, gts, np.zeros(preds.shape, np.uint8)), "must be 2-D"),
        (NaturalImageQualityEvaluator(input_order="HWC", pris_params=niqe_params()), (preds,), "two 96 x 96 blocks"),
    ]
    for metric, args, match in cases:
        with pytest.raises(MetricArgumentError, match=match):
            metric.add(*args)
        assert metric.num_results == 0, type(metric).__name__
        with pytest.raises(ValueError, match="refused since reset"):  # remembered (issue 32, item 2)
            metric.compute()


def test_one_matte_given_bare_is_refused_saying_to_wrap_it_in_a_list():
    """A bare (H, W) matte is a batch of H one-row mattes (MMEval 0.2.1 read it so too): the gradient needs
    2-D mattes, and the error says how to pass one."""
    pred = np.random.default_rng(3).random((32, 32))
    gt, trimap = np.ones((32, 32)), np.full((32, 32), 128, np.uint8)
    metric = GradientError()
    with pytest.raises(
        MetricArgumentError, match=r"got shape \(32,\).*add\(\[pred_alpha\], \[gt_alpha\], \[trimap\]\)"
    ):
        metric.add(pred, gt, trimap)
    metric.add([pred], [gt], [trimap])
    assert metric.num_results == 1


def test_per_image_results_of_mmeval_go_through_compute_metric():
    assert PeakSignalNoiseRatio().compute_metric([30.0, 40.0]) == {"psnr": 35.0}
    assert SumAbsoluteDifferences().compute_metric([np.float64(1.0), np.float64(2.0)]) == {"sad": 1.5}


# -- distributed: every sharding on hub ranks, and the bytes compute() moves ------------------------------------------


def _payload() -> Dict[str, Dict[str, Any]]:
    table = _from_tests("metric_cases")
    cases = _cases.build_cases()
    for case in cases.values():
        single = table.metric_class(case["metric"])(**case["kwargs"], dist_backend="non_dist")
        table.feed(single, case["inputs"], range(case["n"]))
        case["want"] = single.compute()
    return cases


def _run_all_worker(backend, payload):
    return _from_tests("metric_cases").run_all(backend, payload)


def test_every_image_case_equals_one_process_on_hub_ranks():
    # 3 ranks (41 images: padded and uneven); the torch, mpi and horovod envs run the same table at 2 and 3
    pytest.importorskip("scipy")  # ConnectivityError's extra
    ws = 3
    payload = _payload()
    out = run_ranks(_run_all_worker, ws, payload, timeout=240)
    problems = []
    for rank in range(ws):
        status, report = out[rank]
        assert status == "ok", report
        assert len(report) == 4 * len(payload), sorted(report)
        problems += [f"{key}: {value}" for key, value in report.items() if value is not None]
    assert not problems, "\n".join(problems)


def _bytes_worker(backend, payload):
    import warnings

    from mmeval.core.hooks import enable_comm_stats

    table = _from_tests("metric_cases")

    stats = enable_comm_stats(print_at_exit=False)
    out = {}
    for name, case in payload.items():
        sent = []
        for n in (case["n"] // 4, case["n"]):
            metric = table.metric_class(case["metric"])(**case["kwargs"], dist_backend=backend)
            table.feed(metric, case["inputs"], range(backend.rank, n, backend.world_size))
            stats.reset()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # no size: the ShardingWarning
                metric.compute()
            sent.append([(row["op"], row["calls"], row["bytes_sent"]) for row in stats.rows()])
        out[name] = sent
    return out


def test_compute_moves_the_same_bytes_for_a_quarter_of_the_images_and_all_of_them():
    pytest.importorskip("scipy")
    payload = _payload()
    out = run_ranks(_bytes_worker, 2, payload, timeout=240)
    for rank in range(2):
        status, got = out[rank]
        assert status == "ok", got
        for name, (few, many) in got.items():
            assert few == many, (rank, name, few, many)
            # a few 4 KiB slots (the float sums and the sample counts), not one row per image
            assert sum(row[2] for row in many) <= 3 * 4096, (rank, name, many)

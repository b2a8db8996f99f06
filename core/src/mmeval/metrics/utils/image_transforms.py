"""Image transforms the image-quality metrics share: reorder to HWC, crop the border, convert to Y or gray.

MMEval 0.2.1's helper names and behaviour (``reorder_and_crop``, ``reorder_image``, ``rgb2ycbcr``,
``bgr2ycbcr``, ``rgb2gray``, ``bgr2gray`` and the two range converters its tests import), in numpy.
Y is ITU-R BT.601 (MATLAB's ``rgb2ycbcr``), gray is ``0.299 R + 0.587 G + 0.114 B``.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ...core.errors import MetricArgumentError

__all__ = ["bgr2gray", "bgr2ycbcr", "reorder_and_crop", "reorder_image", "rgb2gray", "rgb2ycbcr"]

#: BT.601 rows: Y, Cb, Cr as weights of (R, G, B) on a [0, 1] image, giving [0, 255] values (plus the offsets)
_YCBCR_FROM_RGB = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]])
_YCBCR_OFFSET = np.array([16.0, 128.0, 128.0])
#: gray weights of (R, G, B)
_GRAY_FROM_RGB = np.array([0.299, 0.587, 0.114], dtype=np.float32)

INPUT_ORDERS = ("HWC", "CHW")
CHANNEL_ORDERS = ("rgb", "bgr")


def _convert_input_type_range(img: np.ndarray) -> np.ndarray:
    """``img`` as float32 in [0, 1]: a uint8 image is divided by 255, a float32 one is taken as it is.

    Raises ``TypeError`` for any other dtype.
    """
    if img.dtype == np.uint8:
        return np.asarray(img.astype(np.float32) / np.float32(255.0))
    if img.dtype == np.float32:
        return img.astype(np.float32, copy=True)
    raise TypeError(f"the image must be np.uint8 in [0, 255] or np.float32 in [0, 1], got dtype {img.dtype}")


def _convert_output_type_range(img: np.ndarray, dst_type: Any) -> np.ndarray:
    """An image of values in [0, 255] as ``dst_type``: np.uint8 (rounded) or np.float32 (divided by 255).

    Raises ``TypeError`` for any other ``dst_type``.
    """
    if dst_type is np.uint8 or (isinstance(dst_type, np.dtype) and dst_type == np.uint8):
        return np.round(img).astype(np.uint8)
    if dst_type is np.float32 or (isinstance(dst_type, np.dtype) and dst_type == np.float32):
        return (img / 255.0).astype(np.float32)
    raise TypeError(f"dst_type must be np.uint8 or np.float32, got {dst_type}")


def _to_ycbcr(img: np.ndarray, y_only: bool, bgr: bool) -> np.ndarray:
    dtype = img.dtype
    unit = _convert_input_type_range(img)
    weights = _YCBCR_FROM_RGB[:, ::-1] if bgr else _YCBCR_FROM_RGB
    # term by term, not `@`: a matrix product goes through BLAS, whose kernel (picked by the CPU) rounds the
    # three-term sum differently, and the uint8 rounding below would then flip pixels from machine to machine
    rgb = unit.astype(np.float64)
    rows = weights[:1] if y_only else weights
    out = np.stack(
        [rgb[..., 0] * w[0] + rgb[..., 1] * w[1] + rgb[..., 2] * w[2] + off for w, off in zip(rows, _YCBCR_OFFSET)],
        axis=-1,
    )
    if y_only:
        out = out[..., 0]
    return _convert_output_type_range(out, dtype.type)


def rgb2ycbcr(img: np.ndarray, y_only: bool = False) -> np.ndarray:
    """An RGB image (..., 3) as YCbCr (ITU-R BT.601, as MATLAB's ``rgb2ycbcr``; not OpenCV's JPEG variant).

    ``img`` is np.uint8 in [0, 255] or np.float32 in [0, 1]; the result has the same dtype and range.
    ``y_only``: return only Y, of shape (...).
    """
    return _to_ycbcr(img, y_only, bgr=False)


def bgr2ycbcr(img: np.ndarray, y_only: bool = False) -> np.ndarray:
    """:func:`rgb2ycbcr` of a BGR image."""
    return _to_ycbcr(img, y_only, bgr=True)


def _to_gray(img: np.ndarray, keepdim: bool, bgr: bool) -> np.ndarray:
    if img.ndim != 3 or img.shape[-1] != 3:
        raise MetricArgumentError(f"a gray conversion needs an (H, W, 3) image, got shape {img.shape}")
    weights = _GRAY_FROM_RGB[::-1] if bgr else _GRAY_FROM_RGB
    work = img.astype(np.float32) if img.dtype != np.float64 else img
    out = work[..., 0] * weights[0] + work[..., 1] * weights[1] + work[..., 2] * weights[2]
    if img.dtype == np.uint8:
        out = np.clip(np.round(out), 0, 255).astype(np.uint8)
    return np.asarray(out[..., None] if keepdim else out)


def rgb2gray(img: np.ndarray, keepdim: bool = False) -> np.ndarray:
    """An RGB image (H, W, 3) as gray ``0.299 R + 0.587 G + 0.114 B``: (H, W), or (H, W, 1) with ``keepdim``."""
    return _to_gray(img, keepdim, bgr=False)


def bgr2gray(img: np.ndarray, keepdim: bool = False) -> np.ndarray:
    """:func:`rgb2gray` of a BGR image."""
    return _to_gray(img, keepdim, bgr=True)


def reorder_image(img: np.ndarray, input_order: str = "HWC") -> np.ndarray:
    """``img`` in HWC order: (H, W) becomes (H, W, 1), (C, H, W) with ``input_order='CHW'`` becomes (H, W, C).

    Raises :class:`~mmeval.core.errors.MetricArgumentError` (a ``ValueError``) for an ``input_order``
    other than ``'HWC'`` or ``'CHW'``.
    """
    if input_order not in INPUT_ORDERS:
        raise MetricArgumentError(f"input_order must be 'HWC' or 'CHW', got {input_order!r}")
    if img.ndim == 2:
        return np.asarray(img[..., None])
    if input_order == "CHW":
        return np.asarray(img.transpose(1, 2, 0))
    return img


def reorder_and_crop(
    img: np.ndarray,
    crop_border: int = 0,
    input_order: str = "HWC",
    convert_to: Optional[str] = None,
    channel_order: str = "rgb",
) -> np.ndarray:
    """An image with values in [0, 255] made ready for a comparison, as float64 (H, W, C).

    In order: reorder to HWC (:func:`reorder_image`), cast to float32 (as MMEval 0.2.1 does: a float64
    image is rounded to float32 here), convert to ``convert_to`` -- ``None`` (unchanged), ``'Y'``
    (BT.601 luma) or ``'gray'``, from ``channel_order`` ``'rgb'`` or ``'bgr'`` (then C = 1) --, and
    drop ``crop_border`` pixels at each edge. A 4-D input (T, ...) is a video: each frame is done
    alone and the result is (T, H, W, C).

    Raises :class:`~mmeval.core.errors.MetricArgumentError` (a ``ValueError``) for an unknown
    ``convert_to`` or ``channel_order``.
    """
    if img.ndim == 4:
        return np.stack(
            [reorder_and_crop(frame, crop_border, input_order, convert_to, channel_order) for frame in img]
        ).astype(np.float64)
    hwc = reorder_image(img, input_order).astype(np.float32)
    if convert_to is not None:
        target = convert_to.lower() if isinstance(convert_to, str) else convert_to
        if target not in ("y", "gray"):
            raise MetricArgumentError(f"convert_to must be 'Y', 'gray' or None, got {convert_to!r}")
        if channel_order not in CHANNEL_ORDERS:
            raise MetricArgumentError(
                f"channel_order must be 'rgb' or 'bgr' to convert to {convert_to!r}, got {channel_order!r}"
            )
        unit = hwc / np.float32(255.0)
        if target == "y":
            hwc = (_to_ycbcr(unit, True, channel_order == "bgr") * np.float32(255.0))[..., None]
        else:
            hwc = (_to_gray(unit, False, channel_order == "bgr") * np.float32(255.0))[..., None]
    if crop_border:
        hwc = hwc[crop_border:-crop_border, crop_border:-crop_border, :]
    return hwc.astype(np.float64)

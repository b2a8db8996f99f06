"""Rotated boxes ``(cx, cy, w, h, angle)``: areas, corners, exact IoUs, and MMEval 0.2.1's conversions.

The IoU of two rotated boxes is the area of the intersection of their rectangles (two convex
polygons) over the area of their union, computed exactly in float64 with numpy (the convex
intersection's vertices -- corners inside the other box and edge crossings -- ordered around their
centroid, then the shoelace formula). :func:`qbox_to_rbox` needs OpenCV (the ``opencv`` extra).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mmeval.core.errors import MetricArgumentError

__all__ = ["qbox_to_rbox", "le90_to_oc", "calculate_bboxes_area_rotated", "calculate_overlaps_rotated", "rbox_corners"]

#: pairs of boxes clipped at once (bounds the temporary arrays to a few tens of MiB)
_CHUNK = 1 << 15


def _boxes(boxes: Any, what: str, columns: int) -> np.ndarray:
    arr = np.asarray(boxes)
    if arr.ndim != 2 or arr.shape[-1] != columns:
        raise MetricArgumentError(f"{what} must have shape (n, {columns}), got {arr.shape}")
    return arr


def qbox_to_rbox(boxes: np.ndarray) -> np.ndarray:
    """Quadrilaterals ``(n, 8)`` (x1, y1, ..., x4, y4) to their minimum-area rotated rectangles ``(n, 5)``.

    As MMEval 0.2.1: the corners are truncated to integers and the rectangle is OpenCV's
    ``minAreaRect``; its angle is given in radians in ``(0, pi/2]`` (OpenCV 4.5.1-4.x's convention,
    which OpenCV 5 changed to ``[-pi/2, 0)``: the same rectangle is written in the former whatever
    the OpenCV version).
    Needs the ``opencv`` extra; a shape other than ``(n, 8)`` raises :class:`MetricArgumentError`.
    """
    from mmeval.metrics.extras import import_extra

    arr = _boxes(boxes, "qbox_to_rbox: boxes", 8)
    cv2 = import_extra("cv2", "qbox_to_rbox (DOTAMeanAP with (n, 8) boxes)")
    out = np.zeros((arr.shape[0], 5), dtype=np.float64)
    for i, pts in enumerate(arr.reshape(-1, 4, 2).astype(np.int64)):
        (x, y), (w, h), angle = cv2.minAreaRect(pts)
        turns = int(np.floor((90.0 - angle) / 90.0))  # quarter turns that bring the angle into (0, 90]
        if turns % 2:  # each quarter turn swaps the width and the height of the same rectangle
            w, h = h, w
        out[i] = (x, y, w, h, (angle + 90.0 * turns) / 180 * np.pi)
    return out


def le90_to_oc(bboxes: np.ndarray) -> np.ndarray:
    """Rotated boxes with angles in ``[-pi/2, pi/2)`` (``le90``) to OpenCV's ``(0, pi/2]`` (same rectangles).

    A box with a non-positive angle turns by ``pi/2`` and swaps its width and height (twice for an angle
    of ``-pi/2``). A shape other than ``(n, 5)`` raises :class:`MetricArgumentError`.
    """
    arr = _boxes(bboxes, "le90_to_oc: bboxes", 5)
    out = np.array(arr, dtype=np.float64 if arr.dtype.kind != "f" else arr.dtype)
    for turn in (out[:, 4] <= 0.0, np.round(arr[:, 4], 8) == -np.round(np.pi / 2, 8)):
        out[turn, 4] += np.pi / 2
        out[turn, 2], out[turn, 3] = out[turn, 3].copy(), out[turn, 2].copy()
    return out


def calculate_bboxes_area_rotated(bboxes: np.ndarray) -> np.ndarray:
    """The areas ``w * h`` of rotated boxes ``(..., 5)`` (one box ``(5,)`` gives a 0-d array)."""
    arr = np.asarray(bboxes)
    result: np.ndarray = arr[..., 2] * arr[..., 3]
    return result


def rbox_corners(bboxes: np.ndarray) -> np.ndarray:
    """The corners ``(n, 4, 2)`` of rotated boxes ``(n, 5)``, counter-clockwise for positive ``w`` and ``h``.

    The angle turns the box's width axis from the x axis towards the y axis (radians).
    """
    b = np.asarray(bboxes, dtype=np.float64)
    cos, sin = np.cos(b[:, 4]), np.sin(b[:, 4])
    half_w = np.stack([cos, sin], axis=1) * (b[:, 2:3] / 2)  # half the width axis
    half_h = np.stack([-sin, cos], axis=1) * (b[:, 3:4] / 2)  # half the height axis
    c = b[:, None, :2]
    signs = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=np.float64)  # (w, h) signs, CCW
    result: np.ndarray = c + signs[None, :, 0:1] * half_w[:, None, :] + signs[None, :, 1:2] * half_h[:, None, :]
    return result


def _cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """z of ``(a - o) x (b - o)`` over the last axis (x, y)."""
    result: np.ndarray = (a[..., 0] - o[..., 0]) * (b[..., 1] - o[..., 1]) - (a[..., 1] - o[..., 1]) * (
        b[..., 0] - o[..., 0]
    )
    return result


def _inside(points: np.ndarray, poly: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """Whether each of ``points`` (p, m, 2) lies in the CCW convex ``poly`` (p, 4, 2), boundary included."""
    edges_from = poly[:, None, :, :]
    edges_to = np.roll(poly, -1, axis=1)[:, None, :, :]
    side = _cross(edges_from, edges_to, points[:, :, None, :])  # (p, m, 4)
    result: np.ndarray = np.all(side >= -tol[:, None, None], axis=2)
    return result


def _intersection_areas(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Areas of the intersections of convex CCW quadrilaterals ``a[i]`` and ``b[i]`` (p, 4, 2) -> (p,)."""
    p = a.shape[0]
    scale = np.maximum(np.abs(a).max(axis=(1, 2)), np.abs(b).max(axis=(1, 2))) + 1.0
    tol = 1e-12 * scale * scale
    a_in = _inside(a, b, tol)
    b_in = _inside(b, a, tol)
    # edge crossings: a's edge e (a0 -> a1) against b's edge f (b0 -> b1), every pair
    a0, a1 = a[:, :, None, :], np.roll(a, -1, axis=1)[:, :, None, :]
    b0, b1 = b[:, None, :, :], np.roll(b, -1, axis=1)[:, None, :, :]
    da, db = a1 - a0, b1 - b0
    denom = da[..., 0] * db[..., 1] - da[..., 1] * db[..., 0]
    off = b0 - a0
    parallel = np.abs(denom) <= 1e-15 * scale[:, None, None] * scale[:, None, None]
    safe = np.where(parallel, 1.0, denom)
    t = (off[..., 0] * db[..., 1] - off[..., 1] * db[..., 0]) / safe
    u = (off[..., 0] * da[..., 1] - off[..., 1] * da[..., 0]) / safe
    eps = 1e-12
    crossing = ~parallel & (t >= -eps) & (t <= 1 + eps) & (u >= -eps) & (u <= 1 + eps)
    hits = a0 + np.clip(t, 0.0, 1.0)[..., None] * da
    points = np.concatenate([a, b, hits.reshape(p, 16, 2)], axis=1)  # (p, 24, 2)
    valid = np.concatenate([a_in, b_in, crossing.reshape(p, 16)], axis=1)
    count = valid.sum(axis=1)
    centre = (points * valid[..., None]).sum(axis=1) / np.maximum(count, 1)[:, None]
    angle = np.arctan2(points[..., 1] - centre[:, None, 1], points[..., 0] - centre[:, None, 0])
    angle = np.where(valid, angle, np.inf)  # the invalid points go last ...
    order = np.argsort(angle, axis=1, kind="stable")
    ring = np.take_along_axis(points, order[..., None], axis=1)
    first = ring[:, :1, :]
    ring = np.where(np.take_along_axis(valid, order, axis=1)[..., None], ring, first)  # ... and repeat the first
    nxt = np.roll(ring, -1, axis=1)
    twice = (ring[..., 0] * nxt[..., 1] - ring[..., 1] * nxt[..., 0]).sum(axis=1)
    result: np.ndarray = np.where(count >= 3, np.maximum(twice / 2.0, 0.0), 0.0)
    return result


def calculate_overlaps_rotated(bboxes1: np.ndarray, bboxes2: np.ndarray, clockwise: bool = True) -> np.ndarray:
    """IoUs ``(n, k)`` (float64) between rotated boxes ``(n, 5)`` and ``(k, 5)`` (``cx, cy, w, h, angle``).

    Exact: the intersection of the two rectangles is clipped as polygons (not approximated), so the value
    does not depend on the angle convention, and ``clockwise`` (MMEval 0.2.1's flag for the direction of
    the angle) changes no IoU (it mirrors both boxes); it is accepted for compatibility. A pair whose
    union is empty (two boxes of area 0) has IoU 0. A shape other than ``(n, 5)`` raises
    :class:`MetricArgumentError` (MMEval: ``AssertionError``).
    """
    b1 = _boxes(bboxes1, "calculate_overlaps_rotated: bboxes1", 5).astype(np.float64)
    b2 = _boxes(bboxes2, "calculate_overlaps_rotated: bboxes2", 5).astype(np.float64)
    n, k = b1.shape[0], b2.shape[0]
    ious = np.zeros((n, k), dtype=np.float64)
    if n * k == 0:
        return ious
    area1, area2 = np.abs(b1[:, 2] * b1[:, 3]), np.abs(b2[:, 2] * b2[:, 3])
    # only pairs whose circumscribed circles meet can overlap
    reach1, reach2 = np.hypot(b1[:, 2], b1[:, 3]) / 2, np.hypot(b2[:, 2], b2[:, 3]) / 2
    gap = np.hypot(b1[:, None, 0] - b2[None, :, 0], b1[:, None, 1] - b2[None, :, 1])
    rows, cols = np.nonzero((gap <= reach1[:, None] + reach2[None, :]) & (area1[:, None] > 0) & (area2[None, :] > 0))
    if not rows.size:
        return ious
    c1, c2 = _ccw(rbox_corners(b1)), _ccw(rbox_corners(b2))
    for s in range(0, rows.size, _CHUNK):
        r, c = rows[s : s + _CHUNK], cols[s : s + _CHUNK]
        inter = _intersection_areas(c1[r], c2[c])
        union = area1[r] + area2[c] - inter
        ious[r, c] = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
    return np.clip(ious, 0.0, 1.0)


def _ccw(corners: np.ndarray) -> np.ndarray:
    """The corners reordered counter-clockwise where a negative width or height made them clockwise."""
    signed = _cross(corners[:, 0], corners[:, 1], corners[:, 2])
    result: np.ndarray = np.where((signed < 0)[:, None, None], corners[:, ::-1], corners)
    return result

"""Polygon helpers of text detection (MMEval 0.2.1's ``mmeval.metrics.utils.polygon``), on shapely.

Polygons are flat point lists ``[x1, y1, x2, y2, ...]`` turned into ``shapely.geometry.Polygon``;
areas of intersection and union repair invalid (self-crossing) polygons first unless told not to.
shapely is imported when a helper runs (the ``shapely`` extra), never at import.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ...core.errors import MetricArgumentError
from ...core.inputs import to_numpy
from ..extras import import_extra

__all__ = ["poly2shapely", "polys2shapely", "poly_make_valid", "poly_intersection", "poly_union", "poly_iou"]

Number = Union[int, float]


def _geometry(user: str) -> ModuleType:
    """``shapely.geometry``, or a :class:`~mmeval.core.errors.MissingExtraError` naming ``user`` and the extra."""
    return import_extra("shapely.geometry", user)


def _check_polygon(poly: Any, what: str, user: str) -> None:
    if not isinstance(poly, _geometry(user).Polygon):
        raise MetricArgumentError(f"{user}: {what} must be a shapely Polygon, got {type(poly).__name__}")


def poly2shapely(polygon: Any, *, what: str = "poly2shapely: polygon") -> Any:
    """A ``shapely.geometry.Polygon`` of the points ``[x1, y1, x2, y2, ...]`` (at least 3 points), in float32.

    ``polygon`` may be a list, a numpy array or a framework tensor. Any other size, or a NaN or infinite
    coordinate (which GEOS would refuse with an error naming no argument), raises
    :class:`~mmeval.core.errors.MetricArgumentError` (an ``AssertionError`` too, as MMEval's) naming ``what``.
    """
    geometry = _geometry("poly2shapely")
    points = to_numpy(polygon, what).astype(np.float32)
    if points.size % 2 or points.size < 6:
        raise MetricArgumentError(
            f"{what}: a polygon is a flat list of at least 3 (x, y) points, got "
            f"{points.size} value(s): {points.ravel()[:8].tolist()}"
        )
    if not np.isfinite(points).all():
        raise MetricArgumentError(
            f"{what}: a polygon's coordinates must be finite, got {points.ravel()[:8].tolist()}"
            f"{' ...' if points.size > 8 else ''} (NaN or infinite after float32)"
        )
    return geometry.Polygon(points.reshape(-1, 2))


def polys2shapely(polygons: Sequence[Any], *, what: str = "polys2shapely: polygons") -> List[Any]:
    """:func:`poly2shapely` of each polygon of ``polygons`` (an error names ``what[j]``)."""
    return [poly2shapely(polygon, what=f"{what}[{j}]") for j, polygon in enumerate(polygons)]


def poly_make_valid(poly: Any) -> Any:
    """``poly`` itself when it is valid, else its repair ``poly.buffer(0)`` (self-crossing parts dropped)."""
    _check_polygon(poly, "poly", "poly_make_valid")
    return poly if poly.is_valid else poly.buffer(0)


def _area_of(
    op: str, poly_a: Any, poly_b: Any, invalid_ret: Optional[Number], return_poly: bool
) -> Union[Optional[Number], Tuple[Optional[Number], Any]]:
    """The area of ``poly_a.<op>(poly_b)`` (and the shape), or ``invalid_ret`` for an invalid input."""
    user = f"poly_{op}"
    _check_polygon(poly_a, "poly_a", user)
    _check_polygon(poly_b, "poly_b", user)
    if invalid_ret is not None and (isinstance(invalid_ret, bool) or not isinstance(invalid_ret, (int, float))):
        raise MetricArgumentError(f"{user}: invalid_ret must be None or a number, got {invalid_ret!r}")
    if invalid_ret is None:
        poly_a, poly_b = poly_make_valid(poly_a), poly_make_valid(poly_b)
    shape, area = None, invalid_ret
    if poly_a.is_valid and poly_b.is_valid:
        shape = getattr(poly_a, op)(poly_b)
        area = shape.area
    return (area, shape) if return_poly else area


def poly_intersection(poly_a: Any, poly_b: Any, invalid_ret: Optional[Number] = None, return_poly: bool = False) -> Any:
    """The area of the intersection of two polygons (with the intersection when ``return_poly``).

    With ``invalid_ret=None`` invalid polygons are repaired first (:func:`poly_make_valid`);
    otherwise an invalid one makes the area ``invalid_ret`` and the shape ``None``.
    """
    return _area_of("intersection", poly_a, poly_b, invalid_ret, return_poly)


def poly_union(poly_a: Any, poly_b: Any, invalid_ret: Optional[Number] = None, return_poly: bool = False) -> Any:
    """The area of the union of two polygons (with the union, a Polygon or MultiPolygon, when ``return_poly``).

    Invalid polygons are treated as in :func:`poly_intersection`.
    """
    return _area_of("union", poly_a, poly_b, invalid_ret, return_poly)


def poly_iou(poly_a: Any, poly_b: Any, zero_division: float = 0.0) -> float:
    """Intersection over union of two polygons (repaired when invalid); ``zero_division`` when the union is empty."""
    inter = poly_intersection(poly_a, poly_b)
    union = poly_union(poly_a, poly_b)
    return float(inter / union) if union != 0 else zero_division

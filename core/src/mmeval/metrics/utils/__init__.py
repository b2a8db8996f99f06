"""Helpers several metrics share (box overlaps, polygons, image transforms, keypoints, text).

The module paths are MMEval 0.2.1's (``mmeval.metrics.utils.image_transforms``, ...), so code that
imported its helpers keeps working. Like the metrics, nothing here imports a field library at
import time. One block per family below; ``__all__`` is their concatenation.
"""

from typing import List

from .bbox_overlaps_rotated import calculate_bboxes_area_rotated as calculate_bboxes_area_rotated
from .bbox_overlaps_rotated import calculate_overlaps_rotated as calculate_overlaps_rotated
from .bbox_overlaps_rotated import le90_to_oc as le90_to_oc
from .bbox_overlaps_rotated import qbox_to_rbox as qbox_to_rbox
from .bbox_overlaps_rotated import rbox_corners as rbox_corners

# -- boxes (VOC family, rotated boxes) ----------------------------------------------------------------
_BOXES: List[str] = ["calculate_overlaps_rotated", "calculate_bboxes_area_rotated", "qbox_to_rbox", "le90_to_oc",
                     "rbox_corners"]

# -- polygons (text detection) ------------------------------------------------------------------------
_POLYGONS: List[str] = []

# -- images (image quality, matting) ------------------------------------------------------------------
_IMAGES: List[str] = []

# -- keypoints (pose) ---------------------------------------------------------------------------------
_KEYPOINTS: List[str] = []

# -- text (OCR, language) -----------------------------------------------------------------------------
_TEXT: List[str] = []

__all__ = _BOXES + _POLYGONS + _IMAGES + _KEYPOINTS + _TEXT

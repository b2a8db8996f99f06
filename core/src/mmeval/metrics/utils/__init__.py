"""Helpers several metrics share (box overlaps, polygons, image transforms, keypoints, text).

The module paths are MMEval 0.2.1's (``mmeval.metrics.utils.image_transforms``, ...), so code that
imported its helpers keeps working. Like the metrics, nothing here imports a field library at
import time. One block per family below; ``__all__`` is their concatenation.
"""

from typing import List

from .keypoint import calc_distances as calc_distances
from .keypoint import distance_acc as distance_acc

# -- boxes (VOC family, rotated boxes) ----------------------------------------------------------------
_BOXES: List[str] = []

# -- polygons (text detection) ------------------------------------------------------------------------
_POLYGONS: List[str] = []

# -- images (image quality, matting) ------------------------------------------------------------------
_IMAGES: List[str] = []

# -- keypoints (pose) ---------------------------------------------------------------------------------
_KEYPOINTS: List[str] = ["calc_distances", "distance_acc"]

# -- text (OCR, language) -----------------------------------------------------------------------------
_TEXT: List[str] = []

__all__ = _BOXES + _POLYGONS + _IMAGES + _KEYPOINTS + _TEXT

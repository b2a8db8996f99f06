"""Helpers several metrics share (box overlaps, polygons, image transforms, keypoints, text).

The module paths are MMEval 0.2.1's (``mmeval.metrics.utils.image_transforms``, ...), so code that
imported its helpers keeps working. Like the metrics, nothing here imports a field library at
import time. One block per family below; ``__all__`` is their concatenation.
"""

from typing import List

from .image_transforms import bgr2gray as bgr2gray
from .image_transforms import bgr2ycbcr as bgr2ycbcr
from .image_transforms import reorder_and_crop as reorder_and_crop
from .image_transforms import reorder_image as reorder_image
from .image_transforms import rgb2gray as rgb2gray
from .image_transforms import rgb2ycbcr as rgb2ycbcr

# -- boxes (VOC family, rotated boxes) ----------------------------------------------------------------
_BOXES: List[str] = []

# -- polygons (text detection) ------------------------------------------------------------------------
_POLYGONS: List[str] = []

# -- images (image quality, matting) ------------------------------------------------------------------
_IMAGES: List[str] = ["reorder_and_crop", "reorder_image", "rgb2ycbcr", "bgr2ycbcr", "rgb2gray", "bgr2gray"]

# -- keypoints (pose) ---------------------------------------------------------------------------------
_KEYPOINTS: List[str] = []

# -- text (OCR, language) -----------------------------------------------------------------------------
_TEXT: List[str] = []

__all__ = _BOXES + _POLYGONS + _IMAGES + _KEYPOINTS + _TEXT

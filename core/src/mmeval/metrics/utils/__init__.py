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
from .grammar import get_n_gram as get_n_gram
from .grammar import get_tokenizer as get_tokenizer
from .grammar import infer_language as infer_language
from .grammar import longest_common_subsequence as longest_common_subsequence
from .image_transforms import bgr2gray as bgr2gray
from .image_transforms import bgr2ycbcr as bgr2ycbcr
from .image_transforms import reorder_and_crop as reorder_and_crop
from .image_transforms import reorder_image as reorder_image
from .image_transforms import rgb2gray as rgb2gray
from .image_transforms import rgb2ycbcr as rgb2ycbcr
from .keypoint import calc_distances as calc_distances
from .keypoint import distance_acc as distance_acc
from .polygon import poly2shapely as poly2shapely
from .polygon import poly_intersection as poly_intersection
from .polygon import poly_iou as poly_iou
from .polygon import poly_make_valid as poly_make_valid
from .polygon import poly_union as poly_union
from .polygon import polys2shapely as polys2shapely

# -- boxes (VOC family, rotated boxes) ----------------------------------------------------------------
_BOXES: List[str] = [
    "calculate_overlaps_rotated",
    "calculate_bboxes_area_rotated",
    "qbox_to_rbox",
    "le90_to_oc",
    "rbox_corners",
]

# -- polygons (text detection) ------------------------------------------------------------------------
_POLYGONS: List[str] = [
    "poly2shapely",
    "polys2shapely",
    "poly_make_valid",
    "poly_intersection",
    "poly_union",
    "poly_iou",
]

# -- images (image quality, matting) ------------------------------------------------------------------
_IMAGES: List[str] = ["reorder_and_crop", "reorder_image", "rgb2ycbcr", "bgr2ycbcr", "rgb2gray", "bgr2gray"]

# -- keypoints (pose) ---------------------------------------------------------------------------------
_KEYPOINTS: List[str] = ["calc_distances", "distance_acc"]

# -- text (OCR, language) -----------------------------------------------------------------------------
_TEXT: List[str] = ["get_n_gram", "get_tokenizer", "infer_language", "longest_common_subsequence"]

__all__ = _BOXES + _POLYGONS + _IMAGES + _KEYPOINTS + _TEXT

"""Metrics shipped with mmeval-core.

Importing this package is cheap: no metric module imports a framework or a field library
(pycocotools, scipy, opencv, shapely) at import time; a metric that needs one imports it when it is
used and, when it is missing, names the extra to install (``pip install 'mmeval-core[<extra>]'``).
One block per family below (each name imported ``as`` itself: an explicit re-export);
``__all__`` is the concatenation of the families' lists.
"""

from typing import List

from .accuracy import Accuracy as Accuracy
from .accuracy import AccuracyWarning as AccuracyWarning
from .accuracy import DefaultThresholdWarning as DefaultThresholdWarning
from .accuracy import TopkWithLabelsWarning as TopkWithLabelsWarning
from .average_precision import AveragePrecision as AveragePrecision
from .coco_detection import COCODetection as COCODetection
from .mean_iou import MeanIoU as MeanIoU
from .multi_label import MultiLabelMetric as MultiLabelMetric
from .multi_label import MultiLabelPrecisionRecallF1score as MultiLabelPrecisionRecallF1score
from .single_label import SingleLabelMetric as SingleLabelMetric
from .single_label import SingleLabelPrecisionRecallF1score as SingleLabelPrecisionRecallF1score
from .voc_map import VOCMeanAP as VOCMeanAP

_CLASSIFICATION = ["Accuracy", "AccuracyWarning", "DefaultThresholdWarning", "TopkWithLabelsWarning",
                   "SingleLabelMetric", "SingleLabelPrecisionRecallF1score", "MultiLabelMetric",
                   "MultiLabelPrecisionRecallF1score", "AveragePrecision"]
_SEGMENTATION = ["MeanIoU"]
_DETECTION = ["VOCMeanAP"]

# -- COCO detection --------------------------------------------------------------------------------
_COCO: List[str] = ["COCODetection"]

# -- more detection (OID, DOTA) ----------------------------------------------------------------------
_VOC_FAMILY: List[str] = []

# -- AVA, proposals, text detection -----------------------------------------------------------------
_MATCHING: List[str] = []

# -- image quality, matting, optical flow -----------------------------------------------------------
_IMAGE: List[str] = []

# -- pose -----------------------------------------------------------------------------------------
_POSE: List[str] = []

# -- text, OCR, language models -------------------------------------------------------------------
_TEXT: List[str] = []

# -- MMEval 0.2.1 compatibility names ----------------------------------------------------------------
_COMPAT: List[str] = []

__all__ = (_CLASSIFICATION + _SEGMENTATION + _DETECTION + _COCO + _VOC_FAMILY + _MATCHING + _IMAGE + _POSE + _TEXT
           + _COMPAT)

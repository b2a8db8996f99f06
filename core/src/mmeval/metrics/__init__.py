"""Metrics shipped with mmeval-core."""

from .accuracy import Accuracy, AccuracyWarning, DefaultThresholdWarning, TopkWithLabelsWarning
from .mean_iou import MeanIoU
from .voc_map import VOCMeanAP

__all__ = ["Accuracy", "AccuracyWarning", "DefaultThresholdWarning", "TopkWithLabelsWarning", "MeanIoU", "VOCMeanAP"]

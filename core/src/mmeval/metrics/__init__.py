"""Metrics shipped with mmeval-core."""

from .accuracy import Accuracy, AccuracyWarning, DefaultThresholdWarning, TopkWithLabelsWarning
from .average_precision import AveragePrecision
from .mean_iou import MeanIoU
from .multi_label import MultiLabelMetric, MultiLabelPrecisionRecallF1score
from .single_label import SingleLabelMetric, SingleLabelPrecisionRecallF1score
from .voc_map import VOCMeanAP

__all__ = ["Accuracy", "AccuracyWarning", "DefaultThresholdWarning", "TopkWithLabelsWarning", "MeanIoU", "VOCMeanAP",
           "SingleLabelMetric", "SingleLabelPrecisionRecallF1score", "MultiLabelMetric",
           "MultiLabelPrecisionRecallF1score", "AveragePrecision"]

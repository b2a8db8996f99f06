"""Metrics shipped with mmeval-core."""

from .accuracy import Accuracy, AccuracyWarning, DefaultThresholdWarning, TopkWithLabelsWarning

__all__ = ["Accuracy", "AccuracyWarning", "DefaultThresholdWarning", "TopkWithLabelsWarning"]

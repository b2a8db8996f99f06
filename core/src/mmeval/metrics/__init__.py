"""Metrics shipped with mmeval-core."""

from .accuracy import Accuracy

__all__ = ["Accuracy"]

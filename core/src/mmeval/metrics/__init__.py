"""Metrics shipped with mmeval-core.

Importing this package is cheap: no metric module imports a framework or a field library
(pycocotools, scipy, opencv, shapely) at import time; a metric that needs one imports it when it is
used and, when it is missing, names the extra to install (``pip install 'mmeval-core[<extra>]'``).
One block per family below (each name imported ``as`` itself: an explicit re-export);
``__all__`` is the concatenation of the families' lists.
"""

from typing import Any, Dict, List

from .accuracy import Accuracy as Accuracy
from .accuracy import AccuracyWarning as AccuracyWarning
from .accuracy import DefaultThresholdWarning as DefaultThresholdWarning
from .accuracy import TopkWithLabelsWarning as TopkWithLabelsWarning
from .ava_map import AVAMeanAP as AVAMeanAP
from .average_precision import AveragePrecision as AveragePrecision
from .bleu import BLEU as BLEU
from .char_recall_precision import CharRecallPrecision as CharRecallPrecision
from .coco_detection import COCODetection as COCODetection
from .connectivity_error import ConnectivityError as ConnectivityError
from .dota_map import DOTAMeanAP as DOTAMeanAP
from .end_point_error import EndPointError as EndPointError
from .f1_score import F1Score as F1Score
from .gradient_error import GradientError as GradientError
from .hmean_iou import HmeanIoU as HmeanIoU
from .keypoint_auc import KeypointAUC as KeypointAUC
from .keypoint_epe import KeypointEndPointError as KeypointEndPointError
from .keypoint_nme import KeypointNME as KeypointNME
from .mae import MeanAbsoluteError as MeanAbsoluteError
from .matting_mse import MattingMeanSquaredError as MattingMeanSquaredError
from .mean_iou import MeanIoU as MeanIoU
from .mse import MeanSquaredError as MeanSquaredError
from .multi_label import MultiLabelMetric as MultiLabelMetric
from .multi_label import MultiLabelPrecisionRecallF1score as MultiLabelPrecisionRecallF1score
from .niqe import NaturalImageQualityEvaluator as NaturalImageQualityEvaluator
from .oid_map import OIDMeanAP as OIDMeanAP
from .pck_accuracy import JhmdbPCKAccuracy as JhmdbPCKAccuracy
from .pck_accuracy import MpiiPCKAccuracy as MpiiPCKAccuracy
from .pck_accuracy import PCKAccuracy as PCKAccuracy
from .perplexity import Perplexity as Perplexity
from .precision_recall_f1score import PrecisionRecallF1score as PrecisionRecallF1score
from .proposal_recall import ProposalRecall as ProposalRecall
from .psnr import PeakSignalNoiseRatio as PeakSignalNoiseRatio
from .rouge import ROUGE as ROUGE
from .sad import SumAbsoluteDifferences as SumAbsoluteDifferences
from .single_label import SingleLabelMetric as SingleLabelMetric
from .single_label import SingleLabelPrecisionRecallF1score as SingleLabelPrecisionRecallF1score
from .snr import SignalNoiseRatio as SignalNoiseRatio
from .ssim import StructuralSimilarity as StructuralSimilarity
from .voc_map import VOCMeanAP as VOCMeanAP
from .word_accuracy import WordAccuracy as WordAccuracy

_CLASSIFICATION = [
    "Accuracy",
    "AccuracyWarning",
    "DefaultThresholdWarning",
    "TopkWithLabelsWarning",
    "SingleLabelMetric",
    "SingleLabelPrecisionRecallF1score",
    "MultiLabelMetric",
    "MultiLabelPrecisionRecallF1score",
    "AveragePrecision",
]
_SEGMENTATION = ["MeanIoU"]
_DETECTION = ["VOCMeanAP"]

# -- COCO detection --------------------------------------------------------------------------------
_COCO: List[str] = ["COCODetection"]

# -- more detection (OID, DOTA) ----------------------------------------------------------------------
_VOC_FAMILY: List[str] = ["OIDMeanAP", "DOTAMeanAP"]

# -- AVA, proposals, text detection -----------------------------------------------------------------
_MATCHING: List[str] = ["AVAMeanAP", "ProposalRecall", "HmeanIoU"]

# -- image quality, matting, optical flow -----------------------------------------------------------
_IMAGE: List[str] = [
    "MeanAbsoluteError",
    "MeanSquaredError",
    "PeakSignalNoiseRatio",
    "SignalNoiseRatio",
    "StructuralSimilarity",
    "MattingMeanSquaredError",
    "SumAbsoluteDifferences",
    "GradientError",
    "ConnectivityError",
    "EndPointError",
    "NaturalImageQualityEvaluator",
]

# -- pose -----------------------------------------------------------------------------------------
_POSE: List[str] = [
    "PCKAccuracy",
    "MpiiPCKAccuracy",
    "JhmdbPCKAccuracy",
    "KeypointAUC",
    "KeypointEndPointError",
    "KeypointNME",
]

# -- text, OCR, language models -------------------------------------------------------------------
_TEXT: List[str] = ["BLEU", "ROUGE", "Perplexity", "F1Score", "CharRecallPrecision", "WordAccuracy"]

# -- MMEval 0.2.1 compatibility names ----------------------------------------------------------------
# SingleLabelMetric / MultiLabelMetric (this project's names) and SingleLabelPrecisionRecallF1score /
# MultiLabelPrecisionRecallF1score (MMEval 0.2.1's) are the same classes and neither warns (see docs/metrics.md).
_COMPAT: List[str] = ["PrecisionRecallF1score"]

#: MMEval 0.2.1's deprecated metric aliases -> the names they stand for. ``mmeval.metrics.<alias>`` and
#: ``mmeval.<alias>`` warn (DeprecationWarning) and return the metric, looked up when asked for (so an alias
#: works as soon as its metric's module is in this package).
__deprecated_metric_names__: Dict[str, str] = {
    "COCODetectionMetric": "COCODetection",
    "F1Metric": "F1Score",
    "MAE": "MeanAbsoluteError",
    "MSE": "MeanSquaredError",
    "PSNR": "PeakSignalNoiseRatio",
    "SNR": "SignalNoiseRatio",
    "SSIM": "StructuralSimilarity",
    "SAD": "SumAbsoluteDifferences",
    "MattingMSE": "MattingMeanSquaredError",
}


def __getattr__(name: str) -> Any:
    """Resolve MMEval 0.2.1's deprecated metric aliases, with a ``DeprecationWarning`` naming the new name."""
    new = __deprecated_metric_names__.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if new not in globals():
        raise AttributeError(
            f"module {__name__!r} has no attribute {name!r}: it is MMEval 0.2.1's deprecated alias of {new!r}, "
            f"which this version of mmeval.metrics does not provide"
        )
    from ..core.inputs import warn_user

    warn_user(
        f"`{name}` is MMEval 0.2.1's deprecated alias of `{new}`: use `{new}` (mmeval.metrics.{new}) "
        f"instead; the alias resolves to it",
        DeprecationWarning,
    )
    return globals()[new]


__all__ = (
    _CLASSIFICATION + _SEGMENTATION + _DETECTION + _COCO + _VOC_FAMILY + _MATCHING + _IMAGE + _POSE + _TEXT + _COMPAT
)

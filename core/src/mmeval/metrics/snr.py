"""Signal-to-noise ratio of images (MMEval's ``SignalNoiseRatio``)."""

from __future__ import annotations

import numpy as np

from ._per_image import ComparedImages

__all__ = ["SNR", "SignalNoiseRatio"]


class SignalNoiseRatio(ComparedImages):
    """SNR in dB, ``10 log10(mean(gt^2) / mean((gt - pred)^2))`` per image, averaged over images.

    Arguments as :class:`~mmeval.metrics.PeakSignalNoiseRatio`'s (``crop_border``, ``input_order``,
    ``convert_to``, ``channel_order``).

    ``add(predictions, groundtruths, channel_order=None)`` as
    :class:`~mmeval.metrics.PeakSignalNoiseRatio`. Identical images score
    ``inf``; a black ground truth ``-inf`` (``nan`` when the prediction is black
    too), as in MMEval. Result key ``snr`` (dB, a Python float).

    A state metric: the sum of the images' SNRs and their count move, whatever
    the number of images.

    Units: ``snr`` in decibels (dB), as MMEval 0.2.1's.
    """

    KEY = "snr"

    def _frame_score(self, pred: np.ndarray, gt: np.ndarray) -> float:
        return float(self.compute_snr(pred, gt))

    @staticmethod
    def compute_snr(prediction: np.ndarray, groundtruth: np.ndarray) -> float:
        """SNR (dB) of ``prediction`` against ``groundtruth`` (values in [0, 255])."""
        gt = np.asarray(groundtruth, dtype=np.float64)
        signal = float(np.mean(gt**2))
        noise = float(np.mean((gt - np.asarray(prediction, dtype=np.float64)) ** 2))
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(10.0 * np.log10(np.float64(signal) / np.float64(noise)))


#: MMEval 0.2.1's deprecated name
SNR = SignalNoiseRatio

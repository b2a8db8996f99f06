"""mmeval-coco-native: COCODetection's matching and accumulation kernels in C (optional).

mmeval's ``COCODetection`` uses these when this distribution is installed and
``MMEVAL_COCO_NATIVE`` is not ``0``; the numbers are the pure numpy path's, bit for bit.
The functions take C-contiguous numpy arrays of the documented dtypes; call them
through :mod:`mmeval.metrics.coco_native`, which checks them.
"""

from ._kernels import (
    Block,
    accumulate,
    blocks_clear,
    blocks_pooled,
    gather,
    kept,
    match,
    pack_rows,
    pairwise_sum,
    ranked,
    read_plain,
    rle_decode,
    rle_decode_masks,
    rle_iou_parts,
    rle_lists_runs,
    rle_masks,
    rle_masks_runs,
)

__all__ = [
    "Block",
    "accumulate",
    "blocks_clear",
    "blocks_pooled",
    "gather",
    "kept",
    "match",
    "pack_rows",
    "pairwise_sum",
    "ranked",
    "read_plain",
    "rle_lists_runs",
    "rle_masks",
    "rle_masks_runs",
    "rle_decode",
    "rle_decode_masks",
    "rle_iou_parts",
]
__version__ = "0.1.0"

"""mmeval-torch: torch.distributed communication backends for mmeval.

Registers ``torch_cpu`` (:class:`TorchCPUDist`) and ``torch_cuda``
(:class:`TorchCUDADist`) in the ``mmeval.dist_backends`` entry-point group.
Importing this package does not import torch: torch is imported by the
backends' methods, when they are used.
"""

from __future__ import annotations

from .backends import TorchCPUDist, TorchCUDADist
from .tensors import rebuild_tensor, reduce_tensor, tensor_codec, tensor_reducers

__version__ = "0.1.0"

__all__ = [
    "TorchCPUDist",
    "TorchCUDADist",
    "tensor_reducers",
    "tensor_codec",
    "reduce_tensor",
    "rebuild_tensor",
    "__version__",
]

"""mmeval-paddle: the ``paddle_dist`` communication backend (paddle.distributed) for mmeval.

Importing this package does not import paddle: the backend's methods do.
"""

from __future__ import annotations

from .backend import PaddleDist

__version__ = "0.1.0"

__all__ = ["PaddleDist", "__version__"]

"""mmeval-paddle: the ``paddle_dist`` communication backend (paddle.distributed) for mmeval.

Importing this package does not import paddle: the backend's methods do.
"""

from __future__ import annotations

from .backend import PaddleDist
from .groups import new_group

__version__ = "0.1.0"

__all__ = ["PaddleDist", "new_group", "__version__"]

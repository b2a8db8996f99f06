"""mmeval-jax: the ``jax`` communication backend (multi-process JAX) for mmeval.

Registers ``jax`` (:class:`JaxDist`) in the ``mmeval.dist_backends``
entry-point group. Importing this package does not import jax: the backend's
methods do, when they are used.
"""

from __future__ import annotations

from .backend import JaxDist, bucket_size, jax_distributed_active

__version__ = "0.1.0"

__all__ = ["JaxDist", "bucket_size", "jax_distributed_active", "__version__"]

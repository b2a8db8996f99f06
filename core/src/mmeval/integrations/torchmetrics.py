"""torchmetrics metrics synced through any backend here: MPI, Horovod, JAX, paddle or torch.distributed.

torchmetrics syncs a metric's states with ``dist_sync_fn(tensor, group=None)`` (every rank's tensor,
in rank order) whenever ``distributed_available_fn()`` says several processes run. :func:`sync_kwargs`
gives both, over an mmeval backend::

    from torchmetrics.classification import MulticlassAccuracy
    from mmeval.integrations.torchmetrics import sync_kwargs

    acc = MulticlassAccuracy(num_classes=10, **sync_kwargs("mpi4py"))   # under mpiexec, no torch.distributed
    acc.update(preds, target); acc.compute()                            # the same on every rank

Each state tensor moves in one ``all_gather_object`` of the backend (its timeout, its errors raised on
every rank, its comm stats), any shape or length per rank; it comes back on the tensor's device with its
dtype (bfloat16 included, bit for bit). torch is imported by torchmetrics, never by this module's import.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from mmeval.core.dist import get_dist_backend
from mmeval.core.dist_backends.base_backend import BaseDistBackend

__all__ = ["distributed_available_fn", "dist_sync_fn", "sync_kwargs"]

Backend = Union[str, BaseDistBackend, None]


def _resolve(backend: Backend) -> BaseDistBackend:
    return backend if isinstance(backend, BaseDistBackend) else get_dist_backend(backend)


def _to_numpy(tensor: Any) -> Any:
    """The tensor's values as numpy (bfloat16 as its int16 bits: numpy has no bfloat16)."""
    t = tensor.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        return t.contiguous().view(_torch().int16).numpy()
    return t.numpy()


def _torch() -> Any:
    from mmeval.metrics.extras import import_extra

    return import_extra("torch", "mmeval.integrations.torchmetrics")


def dist_sync_fn(backend: Backend = None) -> Callable[..., List[Any]]:
    """torchmetrics' ``dist_sync_fn``: every rank's copy of a state tensor, in rank order, over ``backend``.

    ``backend``: a backend name, an instance, or ``None`` for the default (resolved at each sync).
    ``group`` (torchmetrics' ``process_group``) is not used: pass a backend built on the group instead.
    """

    def sync(tensor: Any, group: Optional[Any] = None) -> List[Any]:
        torch = _torch()
        every = _resolve(backend).all_gather_object(_to_numpy(tensor))
        out = []
        for values in every:
            t = torch.from_numpy(np.array(values, copy=True))
            if str(tensor.dtype) == "torch.bfloat16":
                t = t.view(torch.bfloat16)
            out.append(t.to(device=tensor.device, dtype=tensor.dtype))
        return out

    return sync


def distributed_available_fn(backend: Backend = None) -> Callable[[], bool]:
    """torchmetrics' ``distributed_available_fn``: whether ``backend`` runs with more than one rank now."""

    def available() -> bool:
        b = _resolve(backend)
        return bool(b.is_initialized and b.world_size > 1)

    return available


def sync_kwargs(backend: Backend = None) -> Dict[str, Callable[..., Any]]:
    """``dist_sync_fn`` and ``distributed_available_fn`` for a torchmetrics metric's constructor, over ``backend``."""
    return {"dist_sync_fn": dist_sync_fn(backend), "distributed_available_fn": distributed_available_fn(backend)}

"""Which process group a torch backend runs on, and what that group is: the group handling both transports share.

:class:`ProcessGroupMember` gives a backend its ``rank`` / ``world_size`` in its
``group`` (the default group when ``None``), the group's global ranks and its
token (one collective sequence per group object, :data:`GROUPS`);
:func:`backend_map` reads which torch backend serves which device. Nothing
here imports torch at import time.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Dict, Hashable, Optional

from mmeval.core.dist_backends.plugin_kit import GroupToken, GroupTokens, not_a_member

if TYPE_CHECKING:  # pragma: no cover
    from torch.distributed import ProcessGroup

__all__ = ["GROUPS", "ProcessGroupMember", "backend_map", "default_backend_map", "torch_dist_initialized"]


def backend_map(config: str) -> Dict[str, str]:
    """Parse a process group's backend string into ``{device type: backend}``.

    ``'cpu:gloo,cuda:nccl'`` -> ``{'cpu': 'gloo', 'cuda': 'nccl'}``. A single
    name applies to the devices that backend serves: ``'gloo'`` and ``'mpi'``
    (and ``'ucc'``) to CPU and CUDA, ``'nccl'`` to CUDA only; an unknown single
    name is assumed to serve both.
    """
    config = config.strip().lower()
    if ":" in config:
        out: Dict[str, str] = {}
        for part in config.split(","):
            device, _, name = part.partition(":")
            if device.strip() and name.strip():
                out[device.strip()] = name.strip()
        return out
    if config in ("nccl", "xccl"):
        return {"cuda": config}
    return {"cpu": config, "cuda": config}


def default_backend_map() -> Dict[str, str]:
    """``{device type: backend}`` of the initialized default process group."""
    import torch.distributed as dist

    getter = getattr(dist, "get_backend_config", None)  # torch >= 2.1
    config = str(getter()) if getter is not None else str(dist.get_backend())
    if config == "undefined":  # init_process_group() with no backend: gloo for CPU (+ nccl if CUDA)
        return {"cpu": "gloo", "cuda": "nccl"}
    return backend_map(config)


def torch_dist_initialized() -> bool:
    """Whether torch.distributed is imported, available and initialized (never imports torch)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return False
    try:
        return bool(dist.is_available() and dist.is_initialized())
    except Exception:  # a half-imported or broken torch is "not initialized"
        return False


#: One token per process group object: the group's collective sequence, and which transport serves which device.
GROUPS = GroupTokens()


class ProcessGroupMember:
    """A backend's process group: its runtime, this process's rank and the world size in it, global ranks."""

    #: The process group the collectives run on (``None``: the default group).
    group: Optional["ProcessGroup"]
    #: The backend's name, for messages (set by the registry).
    name: Optional[str]

    def _dist(self) -> Any:
        """``torch.distributed``, initialized; raises a RuntimeError naming the backend otherwise."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                f"{self.name}: torch.distributed is not initialized; call "
                "torch.distributed.init_process_group(...) before using this backend"
            )
        return dist

    @property
    def is_initialized(self) -> bool:
        """True once torch.distributed is available and its default process group is initialized.

        Never imports torch: if torch.distributed was not imported, it cannot be initialized.
        """
        return torch_dist_initialized()

    @property
    def rank(self) -> int:
        """This process's rank in :attr:`group` (``dist.get_rank(group)``)."""
        rank = int(self._dist().get_rank(self.group))
        if rank < 0:
            raise self._not_member()
        return rank

    @property
    def world_size(self) -> int:
        """The number of processes in :attr:`group` (``dist.get_world_size(group)``)."""
        dist = self._dist()
        if self.group is not None and int(dist.get_rank(self.group)) < 0:
            raise self._not_member()
        return int(dist.get_world_size(self.group))

    def _not_member(self) -> RuntimeError:
        import torch.distributed as dist

        return not_a_member(self.name, f"global rank {dist.get_rank()}", "the process group")

    def _process_group(self) -> Any:
        return self.group if self.group is not None else self._dist().group.WORLD

    def _sequence_key(self) -> Hashable:
        """One key per process group: backends over the same group share a collective sequence."""
        return self._token()

    def _token(self) -> GroupToken:
        return GROUPS.token(self._process_group(), label="WORLD" if self.group is None else None)

    def _global_rank(self, group_rank: int) -> int:
        """The global rank of ``group_rank`` in :attr:`group` (what ``src`` / ``dst`` of torch take)."""
        if self.group is None:
            return group_rank
        dist = self._dist()
        getter = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank
        return int(getter(self.group, group_rank))

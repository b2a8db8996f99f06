"""Parent-side helpers of the torch tests: which (kind, world size) can run here, and shared groups."""

from __future__ import annotations

from typing import Any, List, Optional

import pytest
from _torch_workers import Outcome, Ranks

WORLD_SIZES = (1, 2, 3, 4)
KINDS = ("torch_cpu", "torch_cuda")


def cuda_skip_reason(world_size: int) -> Optional[str]:
    """Why torch_cuda cannot run at ``world_size`` here (``None`` when it can)."""
    import torch

    if not torch.cuda.is_available():
        return f"CUDA is not available (torch {torch.__version__}): the torch_cuda/NCCL tests need a GPU"
    if torch.cuda.device_count() < world_size:
        return f"NCCL needs one GPU per rank: {world_size} ranks, {torch.cuda.device_count()} GPU(s) here"
    return None


def group_params(world_sizes: Any = WORLD_SIZES, kinds: Any = KINDS) -> List[Any]:
    """pytest params ``(kind, world size)``; torch_cuda ones are marked skip (with the reason) where they cannot run."""
    params = []
    for kind in kinds:
        for ws in world_sizes:
            reason = cuda_skip_reason(ws) if kind == "torch_cuda" else None
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            params.append(pytest.param((kind, ws), marks=marks, id=f"{kind}-ws{ws}"))
    return params


class GroupHandle:
    """A lazily started :class:`Ranks`, restarted when an earlier test left it broken."""

    def __init__(self, kind: str, world_size: int) -> None:
        self.kind = kind
        self.world_size = world_size
        self._ranks: Optional[Ranks] = None

    def run(self, name: str, *args: Any, timeout: float = 180.0, **kwargs: Any) -> List[Outcome]:
        """Run check ``name`` on every rank of the group (see :meth:`Ranks.run`)."""
        if self._ranks is not None and self._ranks.broken:
            self._ranks.close(graceful=False)
            self._ranks = None
        if self._ranks is None:
            self._ranks = Ranks(self.world_size, self.kind)
        return self._ranks.run(name, *args, timeout=timeout, **kwargs)

    def close(self) -> None:
        if self._ranks is not None:
            self._ranks.close(graceful=not self._ranks.broken)
            self._ranks = None

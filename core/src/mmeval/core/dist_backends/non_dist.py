"""The single-process backend, built in and always available."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from .base_backend import BaseDistBackend
from .reduction import check_reduce_input, local_result

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["NonDist"]


class NonDist(BaseDistBackend):
    """A backend for a single process: rank 0 of a world of one.

    Collectives return the caller's own object (``[obj]`` for the gathers;
    a copy of the array for the reductions, after the same input checks as
    every backend's); ``src`` / ``dst`` must be 0.
    """

    name = "non_dist"

    @property
    def is_initialized(self) -> bool:
        return False

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    def all_gather_object(self, obj: Any) -> List[Any]:
        return [obj]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        _check_root("broadcast_object", "src", src)
        return obj

    def gather_object(self, obj: Any, dst: int = 0) -> Optional[List[Any]]:
        _check_root("gather_object", "dst", dst)
        return [obj]

    def barrier(self) -> None:
        return None

    def all_reduce(self, array: "np.ndarray", op: str = "sum") -> "np.ndarray":
        _, error = check_reduce_input(self.name, "all_reduce", array, op)
        if error is not None:
            raise error
        return local_result(array)

    def reduce(self, array: "np.ndarray", op: str = "sum", dst: int = 0) -> "Optional[np.ndarray]":
        _, error = check_reduce_input(self.name, "reduce", array, op, dst, 1)
        if error is not None:
            raise error
        return local_result(array)


def _check_root(op: str, arg: str, value: int) -> None:
    if value != 0:
        raise ValueError(f"non_dist.{op}: {arg}={value} is out of range; a single process only has rank 0")

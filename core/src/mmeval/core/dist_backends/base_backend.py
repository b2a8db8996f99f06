"""The distributed-communication interfaces every mmeval backend implements."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, List, Optional, Tuple, TypeVar, Union

from .reduction import (
    REDUCE_OPS,
    ReduceHeader,
    check_reduce_headers,
    check_reduce_input,
    local_result,
    reduce_in_rank_order,
)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["BaseDistBackend", "TensorBaseDistBackend", "Tensor", "REDUCE_OPS"]

Tensor = TypeVar("Tensor")


class BaseDistBackend(metaclass=ABCMeta):
    """The base of every distributed communication backend used by mmeval metrics.

    A backend implements five members -- :attr:`is_initialized`, :attr:`rank`,
    :attr:`world_size`, :meth:`all_gather_object` and :meth:`broadcast_object`
    -- and gets working defaults for the rest (:meth:`gather_object`,
    :meth:`barrier`, :meth:`all_reduce`, :meth:`reduce`, :meth:`detect`),
    which it may override to do better.

    Contract:

    * every rank of the group calls the same collectives in the same order,
      with the same ``src`` / ``dst``;
    * objects are anything picklable; the returned objects are independent of
      the caller's (a copy, or views of freshly received bytes);
    * a backend that cannot complete a collective raises (a
      :class:`~mmeval.core.errors.DistCommunicationError` for the built-in
      ones) rather than blocking forever.
    """

    #: The registry name of the backend (``'torch_cpu'``, ``'mpi4py'``, ...),
    #: used in error messages and for environment settings. Set by subclasses.
    name: ClassVar[str] = ""

    #: Auto-selection rank (as keyring ranks its backends): among the backends
    #: whose :meth:`detect` is true, the highest ``priority`` wins, ties going
    #: to the alphabetically first name. In-tree values: torch_cuda 40,
    #: torch_cpu 30, torch_horovod / tf_horovod 20, mpi4py 10; the default 0
    #: ranks a third-party backend after them unless it says otherwise.
    priority: ClassVar[int] = 0

    @property
    @abstractmethod
    def is_initialized(self) -> bool:
        """True once the distributed environment has been initialized."""

    @property
    @abstractmethod
    def rank(self) -> int:
        """Rank of this process in the backend's process group."""

    @property
    @abstractmethod
    def world_size(self) -> int:
        """Number of processes in the backend's process group."""

    @abstractmethod
    def all_gather_object(self, obj: Any) -> List[Any]:
        """Gather ``obj`` from every rank; every rank gets the list ordered by rank."""

    @abstractmethod
    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Return rank ``src``'s ``obj`` on every rank (other ranks' ``obj`` is ignored)."""

    # -- defaults built from the five members above ------------------------

    def gather_object(self, obj: Any, dst: int = 0) -> Optional[List[Any]]:
        """Gather ``obj`` from every rank to rank ``dst``.

        Returns the list ordered by rank on ``dst`` and ``None`` elsewhere. The
        default all-gathers and drops the result off ``dst``; backends that
        can send to one rank only override it.
        """
        objs = self.all_gather_object(obj)
        return objs if self.rank == dst else None

    def barrier(self) -> None:
        """Block until every rank of the group has reached the barrier."""
        self.all_gather_object(None)

    def all_reduce(self, array: "np.ndarray", op: str = "sum") -> "np.ndarray":
        """Reduce ``array`` over every rank with ``op``; every rank gets the same result.

        Args:
            array: a ``numpy.ndarray`` of integer, unsigned or float dtype, any
                shape (0-d included). bool, complex, object and other dtypes
                are refused (``TypeError``), as is anything not an ndarray.
            op: one of :data:`REDUCE_OPS`: ``'sum'``, ``'min'``, ``'max'``
                (anything else: ``ValueError``).

        Returns:
            A new array of the input's shape and dtype (never the input
            itself). Integer sums wrap around on overflow; ``min`` / ``max``
            propagate NaN.

        Every rank must pass the same shape, dtype and op: otherwise every rank
        raises :class:`~mmeval.core.errors.CollectiveMismatchError` naming the
        field and each rank's value; a rank whose input is refused raises its
        ``TypeError`` / ``ValueError`` and the others a
        ``CollectiveMismatchError`` naming it (nobody waits for it).

        The default is built from :meth:`all_gather_object`: each rank sends its
        header ``(shape, dtype, op)`` with its array, checks every rank's
        header, and reduces the arrays in rank order with numpy, so a float
        result has the same bits on every rank. Backends override it with their
        transport's native reduction.
        """
        name = self.name or type(self).__name__
        header, error = check_reduce_input(name, "all_reduce", array, op)
        if self.world_size == 1:
            if error is not None:
                raise error
            return local_result(array)
        items = self.all_gather_object((tuple(header), array if error is None else None))
        check_reduce_headers(name, "all_reduce", [ReduceHeader(*h) for h, _ in items], self.rank, error)
        return reduce_in_rank_order([a for _, a in items], op, array.dtype, array.shape)

    def reduce(self, array: "np.ndarray", op: str = "sum", dst: int = 0) -> "Optional[np.ndarray]":
        """Reduce ``array`` over every rank with ``op`` to rank ``dst``: the result there, ``None`` elsewhere.

        Arguments, result and errors as :meth:`all_reduce`; every rank must
        also pass the same ``dst`` (a rank of the group, else ``ValueError``).

        The default all-gathers the small headers (so every rank checks every
        header and a mismatch raises on every rank), then sends the arrays to
        ``dst`` with :meth:`gather_object`, which reduces them in rank order
        with numpy.
        """
        name = self.name or type(self).__name__
        ws = self.world_size
        header, error = check_reduce_input(name, "reduce", array, op, dst, ws)
        if ws == 1:
            if error is not None:
                raise error
            return local_result(array)
        headers = self.all_gather_object(tuple(header))
        check_reduce_headers(name, "reduce", [ReduceHeader(*h) for h in headers], self.rank, error)
        arrays = self.gather_object(array, dst)
        if arrays is None:
            return None
        return reduce_in_rank_order(arrays, op, array.dtype, array.shape)

    @classmethod
    def detect(cls) -> bool:
        """Whether this backend's runtime is active in this process.

        Must not import any framework that is not already imported (look in
        ``sys.modules``) and must not start a runtime (e.g. ``MPI_Init``).
        Used by auto-selection; the default says no.
        """
        return False

    @classmethod
    def availability(cls) -> Optional[str]:
        """Whether this backend can run on this machine: ``None`` if so, else the reason, saying what is missing.

        "Installed and loadable" (the class imported) is not "usable here":
        a GPU backend needs a device, a Horovod backend needs Horovod built for
        its framework. Shown by ``mmeval backends --check``. Like
        :meth:`detect` it must not start a runtime (no ``MPI_Init``); unlike
        it, it may import the framework (``--check`` calls it in a child
        process). The default says usable.
        """
        return None

    def __repr__(self) -> str:
        label = self.name or type(self).__name__
        try:
            state = f"rank={self.rank}, world_size={self.world_size}" if self.is_initialized else "not initialized"
        except Exception:  # a broken runtime must not break repr
            state = "state unavailable"
        return f"<{type(self).__name__} {label!r}: {state}>"


class TensorBaseDistBackend(BaseDistBackend, Generic[Tensor]):
    """A base for backends that only have tensor collectives (like PyTorch's).

    Objects are pickled into byte tensors; sizes are all-gathered, tensors are
    padded to the largest size, all-gathered (or broadcast) and unpickled.
    Subclasses implement the five tensor primitives below. The built-in
    backends use the faster frame protocol of
    :class:`~mmeval.core.dist_backends.FramedDistBackend` instead; this class
    stays for third parties who have nothing but tensor collectives.
    """

    @abstractmethod
    def _object_to_tensor(self, obj: Any) -> Tuple[Tensor, Tensor]:
        """Pickle ``obj`` into a byte tensor; return it and its size as a tensor."""

    @abstractmethod
    def _tensor_to_object(self, tensor: Tensor, tensor_size: Union[int, Tensor]) -> Any:
        """Unpickle the first ``tensor_size`` bytes of ``tensor``."""

    @abstractmethod
    def _pad_tensor(self, tensor: Tensor, max_size: Union[int, Tensor]) -> Tensor:
        """Return ``tensor`` padded with zeros to ``max_size`` bytes."""

    @abstractmethod
    def _all_gather(self, tensor: Tensor) -> List[Tensor]:
        """All-gather ``tensor`` (same shape on every rank)."""

    @abstractmethod
    def _broadcast(self, tensor: Tensor, src: int) -> Tensor:
        """Broadcast ``tensor`` from ``src`` and return it."""

    def all_gather_object(self, obj: Any) -> List[Any]:
        """All-gather via sizes, padding and one tensor all-gather."""
        obj_tensor, size_tensor = self._object_to_tensor(obj)
        sizes = self._all_gather(size_tensor)
        max_size = max(sizes)  # type: ignore[type-var]
        gathered = self._all_gather(self._pad_tensor(obj_tensor, max_size))
        return [self._tensor_to_object(t, s) for t, s in zip(gathered, sizes)]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """Broadcast via the size, then the (padded) byte tensor."""
        obj_tensor, size_tensor = self._object_to_tensor(obj)
        size_tensor = self._broadcast(size_tensor, src)
        if self.rank != src:
            obj_tensor = self._pad_tensor(obj_tensor, size_tensor)
        obj_tensor = self._broadcast(obj_tensor, src)
        return self._tensor_to_object(obj_tensor, size_tensor)

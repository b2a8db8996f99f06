"""Exception classes raised by mmeval.

Every error derives from :class:`MMEvalError` and from the builtin exception
that best describes it, so callers may catch either ``LookupError`` /
``ImportError`` / ``TypeError`` / ``TimeoutError`` or the mmeval-specific class.

:class:`BackendNotFoundError` is also an ``AssertionError``: MMEval 0.2.1
asserted on unknown backend names, and code written for it catches that.
"""

from __future__ import annotations

__all__ = [
    "MMEvalError",
    "BackendNotFoundError",
    "BackendNotInstalledError",
    "BackendConflictError",
    "BackendLoadError",
    "BackendTypeError",
    "BackendAlreadyRegisteredError",
    "InvalidBackendNameError",
    "DistCommunicationError",
    "CollectiveTimeoutError",
    "CollectiveMismatchError",
    "RemoteSerializationError",
    "CollectiveFailedError",
    "GroupPoisonedError",
    "ConcurrentCollectiveError",
    "FrameDecodeError",
    "UnsafePayloadError",
    "PeerLost",
    "RemoteMetricError",
    "MetricArgumentError",
    "MetricArgumentKeyError",
    "MetricArgumentTypeError",
    "MetricArgumentMissingError",
    "MissingExtraError",
    "ShardingWarning",
    "DistributedLaunchWarning",
    "AccuracyWarning",
    "TopkWithLabelsWarning",
    "DefaultThresholdWarning",
]


class MMEvalError(Exception):
    """Base class of every error raised by mmeval."""


# --- registry -------------------------------------------------------------


class BackendNotFoundError(MMEvalError, LookupError, AssertionError):
    """No backend of that name is installed or registered.

    Also an ``AssertionError``, so ``except AssertionError`` written for MMEval
    0.2.1 (whose registry asserted on unknown names) still catches it.
    """


class BackendConflictError(MMEvalError, LookupError):
    """Two different distributions provide a backend of the same name."""


class BackendLoadError(MMEvalError, ImportError):
    """A backend's entry point could not be imported."""


class BackendNotInstalledError(BackendLoadError, BackendNotFoundError):
    """A backend class was imported by its MMEval import path, but no installed plugin provides it.

    Raised by ``from mmeval.core.dist_backends.torch_cpu import TorchCPUDist``
    and the like: an ``ImportError`` for import statements (``name`` is the
    dotted path asked for) and a :class:`BackendNotFoundError` for code that
    handles the registry's errors. The message names what to install.
    """


class BackendTypeError(MMEvalError, TypeError):
    """A backend's entry point does not resolve to a ``BaseDistBackend`` subclass."""


class BackendAlreadyRegisteredError(MMEvalError, ValueError, RuntimeError):
    """``register_dist_backend`` was asked to take a name that is taken."""


class InvalidBackendNameError(MMEvalError, ValueError, AssertionError):
    """A backend name does not match ``[a-z][a-z0-9_]*``.

    Also an ``AssertionError``, as MMEval 0.2.1 raised for every name it did
    not know (see :class:`BackendNotFoundError`).
    """


# --- collectives ----------------------------------------------------------


class DistCommunicationError(MMEvalError, RuntimeError):
    """A collective operation failed; raised on every rank that took part."""


class CollectiveTimeoutError(DistCommunicationError, TimeoutError):
    """A collective did not complete within its timeout (a peer died or never came)."""


class CollectiveMismatchError(DistCommunicationError):
    """Ranks called different collectives, or the same one with different roots."""


class RemoteSerializationError(DistCommunicationError):
    """A rank could not serialize its object; every rank raises this."""


class CollectiveFailedError(DistCommunicationError):
    """The transport itself raised during a collective (peer reset, closed socket, ...)."""


class GroupPoisonedError(CollectiveFailedError):
    """An earlier collective on this group failed or timed out: the group cannot be used again.

    Raised at once by every later collective on that group (on every backend),
    naming the first failure. Recover by building a new group (torch:
    ``dist.new_group``; MPI: ``comm.Dup()``) and a backend over it.
    """


class ConcurrentCollectiveError(DistCommunicationError):
    """A second thread called a collective on a group while another collective ran there."""


class FrameDecodeError(DistCommunicationError, ValueError):
    """Bytes received from a peer are not a valid mmeval frame."""


class UnsafePayloadError(DistCommunicationError, TypeError):
    """The ``safe`` codec met a type it does not transport (only plain data is allowed)."""


class PeerLost(DistCommunicationError):
    """Raised by a transport primitive when its transport reports a peer as gone (closed connection, dead process)."""


# --- metrics ----------------------------------------------------------------


class RemoteMetricError(MMEvalError, RuntimeError):
    """``compute_metric`` raised on the computing rank with an exception that could not be sent.

    ``remote_type`` and ``remote_message`` carry the original exception's
    qualified type name and message.
    """

    def __init__(self, message: str, remote_type: str = "", remote_message: str = "") -> None:
        super().__init__(message)
        self.remote_type = remote_type
        self.remote_message = remote_message


class MetricArgumentError(MMEvalError, ValueError, AssertionError):
    """A metric's argument (to its constructor, ``add()`` or ``compute()``) is refused.

    Also an ``AssertionError``: MMEval 0.2.1 asserted on its metrics' arguments, and code (and tests)
    written for it catch that; a ``ValueError`` for everyone else.
    """


class MetricArgumentKeyError(MetricArgumentError, KeyError):
    """A bad metric argument where MMEval 0.2.1 raised a ``KeyError`` (an unknown ``norm_item`` or ``norm_mode``).

    Also a :class:`MetricArgumentError` (``ValueError`` and ``AssertionError``).
    """

    def __str__(self) -> str:  # the message as written, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""


class MetricArgumentTypeError(MetricArgumentError, TypeError):
    """A metric argument of the wrong type where MMEval 0.2.1 raised ``TypeError`` (``ProposalRecall``'s numbers).

    Also a :class:`MetricArgumentError` (``ValueError`` and ``AssertionError``).
    """


class MetricArgumentMissingError(MetricArgumentError, RuntimeError):
    """A metric needs a setting it was given neither as an argument nor in ``dataset_meta`` (``num_classes``,
    OIDMeanAP's class hierarchy).

    Also a ``RuntimeError``, what MMEval 0.2.1 raised there, and a :class:`MetricArgumentError`.
    """


class MissingExtraError(MMEvalError, ImportError):
    """A metric needs a field library (pycocotools, scipy, opencv, shapely) that is not installed.

    The message names the metric, the module and the extra that installs it
    (``pip install 'mmeval-core[<extra>]'``). Raised when the metric needs the library, never at import.
    """


# --- warnings -----------------------------------------------------------------


class ShardingWarning(UserWarning):
    """The ranks' samples may hold padding or duplicates that ``compute()`` cannot drop without help.

    Warned on every rank (each knows the per-rank counts): with
    ``dist_collect_mode='unzip'`` and neither ``size=`` nor ``indices=``, and
    when more samples were added than ``size + world_size - 1`` (a batch-level
    sharding such as HF accelerate's: pass ``indices=`` to ``add()``).
    """


class DistributedLaunchWarning(RuntimeWarning):
    """A launcher started several processes, but the backend in use (``non_dist``) is not distributed.

    Each rank then computes the metric over its own shard only.
    """


class AccuracyWarning(UserWarning):
    """An :class:`~mmeval.metrics.Accuracy` input or setting changed what it reports; each kind is warned once per metric."""


class TopkWithLabelsWarning(AccuracyWarning):
    """``topk`` asks for k > 1 but predictions are labels (N,): only ``top1`` can be reported."""


class DefaultThresholdWarning(AccuracyWarning):
    """The default ``thrs=0.0`` turned top-k hits into misses (true class in the top k, score <= 0)."""

"""What the core knows about backend names it does not provide itself: one record per name.

The in-tree plugins (which distribution and extra provides each, where it lies in a
checkout, MMEval's class name, the launchers it serves, the framework behind it, what
starts its runtime, the hardware it needs) and the MMEval backends mmeval does not
provide (with the reason) are each one :class:`KnownBackend` in :data:`KNOWN_BACKENDS`,
read by the install hints, the messages for unknown names, the launcher warning, the
MMEval import paths and ``mmeval backends --check``. Auto-selection never reads it (the
order is each class's ``priority``). Nothing here imports a plugin or a framework.
"""

from __future__ import annotations

import difflib
from types import MappingProxyType
from typing import Iterable, List, Mapping, NamedTuple, Optional, Tuple

__all__ = [
    "KnownBackend",
    "KNOWN_BACKENDS",
    "install_hint",
    "unsupported_message",
    "did_you_mean",
    "normalize_backend_name",
    "not_found_message",
]


class KnownBackend(NamedTuple):
    """One backend name the core knows of (fsspec's ``known_implementations`` model: name -> record)."""

    #: The project that provides it (``'mmeval-torch'``); ``None`` for a name mmeval does not support.
    distribution: Optional[str] = None
    #: The extra of :attr:`distribution` to install (``'tensorflow'`` for ``mmeval-horovod[tensorflow]``).
    extra: str = ""
    #: Where :attr:`distribution` lies in a checkout of this repository (``pip install <path>``).
    checkout: Optional[str] = None
    #: Appended to the install hint (what else the backend needs built).
    install_note: str = ""
    #: MMEval 0.2.1's class name (``mmeval.core.dist_backends.TorchCPUDist``).
    legacy_class: Optional[str] = None
    #: The launchers (see :data:`mmeval.core.launch.LAUNCHER_VARIABLES`) whose processes it connects.
    launchers: Tuple[str, ...] = ()
    #: The top-level module of its framework (looked up, never imported, by the launcher warning).
    framework: Optional[str] = None
    #: What starts its runtime in a process the launcher started.
    init_step: str = ""
    #: How to install :attr:`framework` when it is missing.
    framework_install: str = ""
    #: What it needs that a machine may lack: ``--check`` reports its absence without failing.
    hardware: Optional[str] = None
    #: Why mmeval does not provide this MMEval backend (the name stays free for a third party).
    unsupported: Optional[str] = None

    @property
    def requirement(self) -> Optional[str]:
        """The pip requirement (``'mmeval-horovod[tensorflow]'``), or ``None``."""
        if self.distribution is None:
            return None
        return f"{self.distribution}[{self.extra}]" if self.extra else self.distribution


_TORCH_INIT = "call torch.distributed.init_process_group(...) before compute()"
_TORCH_INSTALL = "install torch (plugins/torch_backend/README.md says how to pick a CPU or CUDA build)"
_HVD_INIT = "call hvd.init() before compute()"
_HVD_INSTALL = "build Horovod for the framework (plugins/horovod_backend/README.md)"
_HVD_NOTE = " (Horovod itself is built against the framework: see plugins/horovod_backend/README.md)"
_ONEFLOW = (
    "the 'oneflow' package on PyPI is a placeholder without the OneFlow framework, so a OneFlow backend "
    "can be neither built nor tested here"
)

#: Every backend name the core knows of, in the order the launcher advice lists them.
KNOWN_BACKENDS: Mapping[str, KnownBackend] = MappingProxyType(
    {
        "torch_cpu": KnownBackend(
            "mmeval-torch",
            checkout="./plugins/torch_backend",
            legacy_class="TorchCPUDist",
            launchers=("torchrun", "slurm"),
            framework="torch",
            init_step=_TORCH_INIT,
            framework_install=_TORCH_INSTALL,
        ),
        "torch_cuda": KnownBackend(
            "mmeval-torch",
            checkout="./plugins/torch_backend",
            legacy_class="TorchCUDADist",
            launchers=("torchrun", "slurm"),
            framework="torch",
            init_step=_TORCH_INIT,
            framework_install=_TORCH_INSTALL,
            hardware="a CUDA GPU",
        ),
        "mpi4py": KnownBackend(
            "mmeval-mpi4py",
            checkout="./plugins/mpi_backend",
            legacy_class="MPI4PyDist",
            launchers=("mpi", "slurm"),
            framework="mpi4py",
            init_step="MPI starts at the first collective (or where the script imports mpi4py.MPI)",
            framework_install="install mpi4py built for the MPI library of your mpiexec "
            "(`pip install mpi4py mpich`, or your cluster's MPI)",
        ),
        "torch_horovod": KnownBackend(
            "mmeval-horovod",
            "torch",
            "./plugins/horovod_backend",
            _HVD_NOTE,
            "TorchHorovodDist",
            ("horovod",),
            "horovod",
            _HVD_INIT,
            _HVD_INSTALL,
        ),
        "tf_horovod": KnownBackend(
            "mmeval-horovod",
            "tensorflow",
            "./plugins/horovod_backend",
            _HVD_NOTE,
            "TFHorovodDist",
            ("horovod",),
            "horovod",
            _HVD_INIT,
            _HVD_INSTALL,
        ),
        "paddle_dist": KnownBackend(
            "mmeval-paddle", checkout="./plugins/paddle_backend", legacy_class="PaddleDist", framework="paddle"
        ),
        "jax": KnownBackend("mmeval-jax", checkout="./plugins/jax_backend", framework="jax"),
        "oneflow_cpu": KnownBackend(legacy_class="OneFlowDist", unsupported=_ONEFLOW),
        "oneflow_cuda": KnownBackend(unsupported=_ONEFLOW),
        "npu": KnownBackend(
            unsupported="NPU collectives need Ascend hardware and its software stack, which mmeval cannot test"
        ),
    }
)


def install_hint(name: str) -> Optional[str]:
    """How to install the distribution providing backend ``name`` (a record with a distribution), else None.

    Gives the PyPI command and, as the plugins are not published yet, the
    command for a checkout of this repository.
    """
    record = KNOWN_BACKENDS.get(name)
    if record is None or record.requirement is None:
        return None
    requirement = record.requirement
    hint = f"run `pip install '{requirement}'`" if record.extra else f"run `pip install {requirement}`"
    if record.checkout is not None:
        local = f"'{record.checkout}[{record.extra}]'" if record.extra else record.checkout
        hint += (
            f" once it is published on PyPI; until then, from the root of a checkout of the mmeval "
            f"repository, run `pip install {local}`"
        )
    return hint + record.install_note


def unsupported_message(name: str, installed: Iterable[str]) -> Optional[str]:
    """Why MMEval's backend ``name`` is not provided here (and what to do), or None if it is not one of them."""
    record = KNOWN_BACKENDS.get(name)
    if record is None or record.unsupported is None:
        return None
    return (
        f"dist backend {name!r} is not supported by mmeval: {record.unsupported}. MMEval 0.2.1 had it; "
        f"here it is left to a third-party backend, which docs/writing-a-backend.md shows how to write "
        f"(and `mmeval.testing.conformance` how to test). Installed backends: {', '.join(installed)}."
    )


def normalize_backend_name(name: str) -> str:
    """``name`` as a backend name would be written: lower case, ``-``, ``.`` and spaces as ``_``."""
    out = name.strip().lower()
    for sep in ("-", ".", " "):
        out = out.replace(sep, "_")
    return out


def did_you_mean(name: str, installed: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the installed or known name closest to ``name`` (case and ``-`` normalised), or ``''``."""
    known = {k for k, r in KNOWN_BACKENDS.items() if r.requirement}
    names = sorted((set(installed) | known | {"auto"}) - {name})
    wanted = normalize_backend_name(name) if isinstance(name, str) else ""
    if wanted in names:
        return f" Did you mean {wanted!r}?"
    close = difflib.get_close_matches(wanted, names, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def not_found_message(name: str, installed: List[str], why: str = "") -> str:
    """The message for a backend name nothing usable has: the install command, or the closest name and the list.

    ``installed``: the usable names; ``why``: said after the name (``'disabled by MMEVAL_DISABLE_PLUGINS'``).
    """
    unsupported = None if why else unsupported_message(name, installed)
    if unsupported is not None:
        return unsupported
    msg = f"unknown dist backend {name!r}" + (f" ({why})" if why else "")
    hint = install_hint(name)
    if hint is not None:
        msg += (
            f": it is provided by the distribution {KNOWN_BACKENDS[name].requirement}, which is not installed; {hint}."
        )
    else:
        msg += (
            ": no installed distribution declares it in entry-point group 'mmeval.dist_backends' and it was not "
            "registered with register_dist_backend()." + did_you_mean(name, installed)
        )
    msg += f" Installed backends: {', '.join(installed)}."
    if hint is None:
        known = ", ".join(f"{k} ({r.requirement})" for k, r in KNOWN_BACKENDS.items() if r.requirement)
        msg += f" Backends mmeval knows of: {known}."
    return msg

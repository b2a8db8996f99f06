"""Nothing short of real use may import ``mpi4py.MPI`` (whose import runs ``MPI_Init``).

Run alone or under ``mpiexec -n N``: imports the plugin, lists backends,
reads backend infos, loads the class through the registry and MMEval's legacy
name, builds instances, calls ``detect()`` and ``is_initialized``, and resolves
auto-selection -- then checks ``sys.modules``. Reports what ``detect()``,
``is_initialized`` and auto-selection said, for the pytest side to compare
with the world size.
"""

from __future__ import annotations

import sys

from _harness import Checker, launcher_rank, report


def main() -> None:
    c = Checker()
    import mmeval_mpi4py
    import mmeval_mpi4py.backend
    from mmeval.core import dist, list_all_backends
    from mmeval.core.dist_backends import MPI4PyDist as legacy

    names = list_all_backends()
    c.check("mpi4py listed", "mpi4py" in names, names)
    infos = {i.name: i for i in dist.backend_infos()}
    info = infos.get("mpi4py")
    c.check("entry point", info is not None and info.value == "mmeval_mpi4py.backend:MPI4PyDist", info)
    c.check("distribution", info is not None and info.distribution == "mmeval-mpi4py", info)
    c.check("status ok", info is not None and info.status == "ok", info)
    cls = dist.get_dist_backend_class("mpi4py")
    c.check("registry class", cls is mmeval_mpi4py.MPI4PyDist and legacy is cls)
    built = [cls(), cls(timeout=5), cls(codec="pickle"), dist.get_dist_backend("mpi4py")]
    detected = cls.detect()
    initialized = [b.is_initialized for b in built]
    auto = dist.resolve_backend_name("auto")
    # the package mpi4py may be imported (finding mpi4py.MPI does); mpi4py.MPI (MPI_Init) may not
    c.equal("mpi4py.MPI imported", "mpi4py.MPI" in sys.modules, False)
    # world of one: rank and size answer without MPI
    if not detected:
        c.equal("rank without MPI", built[0].rank, 0)
        c.equal("world_size without MPI", built[0].world_size, 1)
        c.equal("still no MPI", "mpi4py.MPI" in sys.modules, False)
    report(launcher_rank(), c, detect=detected, is_initialized=initialized, auto=auto)


if __name__ == "__main__":
    main()

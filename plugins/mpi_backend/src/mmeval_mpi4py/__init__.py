"""mmeval-mpi4py: the ``mpi4py`` distributed communication backend of mmeval.

Installing the distribution registers :class:`~mmeval_mpi4py.backend.MPI4PyDist`
as ``mpi4py`` in the entry-point group ``mmeval.dist_backends``. Importing this
package does not import ``mpi4py.MPI`` (no ``MPI_Init``).
"""

from __future__ import annotations

from .backend import MPI4PyDist
from .launcher import LaunchInfo, launch_info, launcher_world_size

__version__ = "0.1.0"

__all__ = ["MPI4PyDist", "LaunchInfo", "launch_info", "launcher_world_size", "__version__"]

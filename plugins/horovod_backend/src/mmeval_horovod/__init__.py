"""mmeval-horovod: mmeval dist backends over Horovod (``torch_horovod``, ``tf_horovod``).

The backends are registered in the entry-point group ``mmeval.dist_backends``
and are found by mmeval without importing this package. Importing it is
cheap: Horovod, torch and TensorFlow are imported only when a backend is used.
"""

from __future__ import annotations

from .backends import TFHorovodDist, TorchHorovodDist

__all__ = ["TFHorovodDist", "TorchHorovodDist", "__version__"]

__version__ = "0.1.0"

"""Adapters to the frameworks users already run: MMEngine's Evaluator, torchmetrics, Lightning, accelerate.

Each module imports its framework when used, never at ``import mmeval`` (nor at ``import
mmeval.integrations``): install the framework yourself, or the matching extra of mmeval-core
(``pip install 'mmeval-core[mmengine]'``, ``[torchmetrics]``, ``[lightning]``, ``[accelerate]``).

* :mod:`mmeval.integrations.mmengine` -- :class:`~mmeval.integrations.mmengine.MMEngineMetric`, an object
  MMEngine's ``Evaluator`` takes (``dataset_meta``, ``process()``, ``evaluate(size)``), registered in
  MMEngine's ``METRICS`` as ``'MMEvalMetric'`` for configs;
* :mod:`mmeval.integrations.torchmetrics` -- ``dist_sync_fn`` and ``distributed_available_fn`` that sync any
  torchmetrics metric through a backend here (MPI, Horovod, JAX, paddle, torch);
* :mod:`mmeval.integrations.lightning` -- :class:`~mmeval.integrations.lightning.LightningMetric`, a
  ``torchmetrics.Metric`` a ``LightningModule`` logs with ``self.log``, computing an mmeval metric;
* :mod:`mmeval.integrations.accelerate` -- the dataset indices accelerate's batch sharding needs for
  ``add(..., indices=)``.

See docs/collection-and-adapters.md.
"""

from __future__ import annotations

__all__ = ["accelerate", "lightning", "mmengine", "torchmetrics"]

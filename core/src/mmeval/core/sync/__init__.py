"""The compute paths of ``BaseMetric.compute()`` -- how what the ranks kept becomes one result.

One module per path or concern; :class:`~mmeval.core.base_metric.BaseMetric`
chooses the path and calls it:

* :mod:`.refusals` -- the checks that reach every rank before any path runs (a
  refusal on one rank raises on all);
* :mod:`.ordering` -- which samples count (``size=`` padding, ``indices=``
  duplicates) and in what order (one round robin, O(samples) dedup);
* :mod:`.state_path` -- the state path: declared counts combined by ``all_reduce``;
* :mod:`.gather` -- the per-sample path: send to rank 0, assemble in dataset
  order, compute, reply (exceptions included: ``pack_exception`` / ``unpack_exception``);
* :mod:`.partitioned` -- the per-sample path in parts, one per rank;
* :mod:`.add_indices` -- ``add(..., indices=)``: the indices kept beside the results;
* :mod:`.protocols` -- what a path is handed: the call (``Call``) and the protocol of the
  metric's own computation; what the rank kept is :class:`~mmeval.core.results.RankResults` (no
  module here imports ``BaseMetric`` or reads a metric's members).

The next compute path adds a module here.
"""

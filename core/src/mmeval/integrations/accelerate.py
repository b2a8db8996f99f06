"""HF accelerate: the dataset indices its batch sharding needs for ``add(..., indices=)``, and the backend to name.

accelerate deals whole batches round-robin and pads the last round by wrapping to the dataset's
start; its ``gather_for_metrics`` drops that padding by counting, which holds only while every rank
gathers every batch. mmeval drops it by index: wrap the dataset in :class:`IndexedDataset`, pass the
indices to ``add()``, and ``compute()`` counts each sample once, in dataset order, whatever the
sharding (shuffled, ``drop_last``, ``even_batches=False``)::

    loader = accelerator.prepare(DataLoader(IndexedDataset(dataset), batch_size=16, shuffle=True))
    metric = Accuracy(dist_backend=backend_for(accelerator))
    for indices, (x, y) in loader:
        metric.add(model(x), y, indices=indices)
    metric.compute()            # no size=: the indices say which samples count

Nothing here imports accelerate or torch.
"""

from __future__ import annotations

from typing import Any, Tuple

__all__ = ["IndexedDataset", "backend_for"]


class IndexedDataset:
    """A map-style dataset whose item ``i`` is ``(i, dataset[i])``: the DataLoader then yields each batch's indices.

    Works with any dataset a ``DataLoader`` takes by index (``__getitem__`` and ``__len__``); the
    default collate turns the indices into an int64 tensor, which ``add(..., indices=)`` accepts.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Tuple[int, Any]:
        return index, self.dataset[index]


def backend_for(accelerator: Any) -> str:
    """The mmeval backend over accelerate's process group: ``'torch_cuda'`` on CUDA devices, else ``'torch_cpu'``."""
    return "torch_cuda" if getattr(accelerator.device, "type", "cpu") == "cuda" else "torch_cpu"

"""The dataset and model of the examples: scikit-learn's handwritten digits and a small MLP.

The digits ship inside scikit-learn (no download). The model is trained for a
few seconds on the first part of the set; every process of a distributed run
must evaluate the same weights, so one process trains and the others get the
weights (a state dict passed along, or a file in a temporary directory named
by ``$DIGITS_MODEL``). Nothing is written to a fixed path.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Iterable, TypeVar, Union

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

#: Samples held out for evaluation: 541 divides by neither 2, 3 nor 4, so
#: DistributedSampler pads and shards are uneven.
EVAL_SIZE = 541
#: The environment variable naming a weights file written by :func:`save_model`.
MODEL_ENV = "DIGITS_MODEL"

T = TypeVar("T")


def _split():
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    x, y = x[order], y[order]
    return (x[EVAL_SIZE:], y[EVAL_SIZE:]), (x[:EVAL_SIZE], y[:EVAL_SIZE])


def get_eval_dataloader(rank: int = 0, num_replicas: int = 1, batch_size: int = 16):
    """The evaluation split, dealt to ``rank`` by a DistributedSampler (which pads)."""
    _, (x, y) = _split()
    dataset = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    sampler = DistributedSampler(dataset, num_replicas=num_replicas, rank=rank, shuffle=False)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler), len(dataset)


def build_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))


def train_model(epochs: int = 15) -> Dict[str, torch.Tensor]:
    """Train the MLP on the training split (a few seconds on a CPU); return its state dict."""
    torch.manual_seed(0)
    (x, y), _ = _split()
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(epochs):
        for start in range(0, len(ys), 64):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs[start : start + 64]), ys[start : start + 64])
            loss.backward()
            opt.step()
    return model.state_dict()


def save_model(state_dict: Dict[str, torch.Tensor], path: str) -> str:
    """Write ``state_dict`` to ``path`` atomically (a reader never sees half a file); return ``path``."""
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(state_dict, tmp)
    os.replace(tmp, path)
    return path


def get_model(weights: Union[str, Dict[str, torch.Tensor], None] = None) -> torch.nn.Module:
    """The MLP in eval mode with ``weights``: a state dict, a file path, or (None) the file ``$DIGITS_MODEL``."""
    if weights is None:
        weights = os.environ.get(MODEL_ENV)
        if not weights:
            raise RuntimeError(
                f"get_model: no weights given and ${MODEL_ENV} is not set; pass the state dict "
                f"from train_model(), or a path written by save_model()"
            )
    state = torch.load(weights) if isinstance(weights, str) else weights
    model = build_model()
    model.load_state_dict(state)
    return model.eval()


def progress(iterable: Iterable[T], rank: int, **kwargs: Any) -> Iterable[T]:
    """``tqdm(iterable)`` on rank 0 of an interactive terminal; the bare iterable otherwise.

    A progress bar on a pipe or in a log file only leaves carriage-return residue.
    """
    if rank != 0 or not sys.stderr.isatty():
        return iterable
    import tqdm

    return tqdm.tqdm(iterable, **kwargs)  # type: ignore[no-any-return]

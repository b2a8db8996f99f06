"""The dataset and model of the examples: scikit-learn's handwritten digits and a small MLP.

The digits ship inside scikit-learn (no download). The model is trained for a
few seconds on the first part of the set and cached in a file, so every
process of a distributed run evaluates the same weights.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

#: Samples held out for evaluation: 541 divides by neither 2, 3 nor 4, so
#: DistributedSampler pads and shards are uneven.
EVAL_SIZE = 541
MODEL_PATH = os.environ.get("DIGITS_MODEL", os.path.join(tempfile.gettempdir(), "mmeval_digits_mlp.pt"))


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


def train_model(path: str = MODEL_PATH, epochs: int = 15) -> str:
    """Train the MLP on the training split (a few seconds on a CPU) and save it to ``path``."""
    torch.manual_seed(0)
    (x, y), _ = _split()
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    for _ in range(epochs):
        for start in range(0, len(ys), 64):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs[start:start + 64]), ys[start:start + 64])
            loss.backward()
            opt.step()
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)  # atomic: ranks that train concurrently never read a half-written file
    return path


def get_model(pretrained_model_fpath: str = MODEL_PATH) -> torch.nn.Module:
    """The MLP with the saved weights (trained first if the file is missing), in eval mode."""
    if not os.path.exists(pretrained_model_fpath):
        train_model(pretrained_model_fpath)
    model = build_model()
    model.load_state_dict(torch.load(pretrained_model_fpath))
    return model.eval()

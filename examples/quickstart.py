"""A small evaluation with the core alone: discovered backends and an Accuracy result.

Run: python3 examples/quickstart.py
"""

from __future__ import annotations

import numpy as np

from mmeval import Accuracy
from mmeval.core.dist import list_all_backends


def main() -> None:
    print("installed backends:", list_all_backends())
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 1000)
    scores = rng.random((1000, 10))
    scores[np.arange(1000), labels] += rng.random(1000)  # a model better than chance
    accuracy = Accuracy(topk=(1, 3))
    for start in range(0, 1000, 64):
        accuracy.add(scores[start : start + 64], labels[start : start + 64])
    print("accuracy:", accuracy.compute(size=1000))


if __name__ == "__main__":
    main()

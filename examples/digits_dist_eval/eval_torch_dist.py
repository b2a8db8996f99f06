"""MMEval's tutorial: torch.distributed evaluation (spawn + gloo), on the digits.

Run: python examples/digits_dist_eval/eval_torch_dist.py
"""

import torch
from digits_common import get_eval_dataloader, get_model, progress, train_model

from mmeval import Accuracy


def eval_fn(rank, process_num, weights):
    # Distributed environment initialization
    torch.distributed.init_process_group(
        backend="gloo", init_method="tcp://127.0.0.1:2345", world_size=process_num, rank=rank
    )

    eval_dataloader, total_num_samples = get_eval_dataloader(rank, process_num)
    model = get_model(weights)
    # Instantiate `Accuracy` and set up a distributed communication backend.
    # thrs=None: the model's raw logits are ranked as they are (the default
    # thrs=0.0 would count a top-k hit only when the true class scores > 0).
    accuracy = Accuracy(topk=(1, 3), thrs=None, dist_backend="torch_cpu")

    with torch.no_grad():
        for images, labels in progress(eval_dataloader, rank):
            predicted_score = model(images)
            accuracy.add(predictions=predicted_score, labels=labels)

    # Specify the number of dataset samples by size in order to remove
    # duplicate samples padded by the `DistributedSampler`.
    print(accuracy.compute(size=total_num_samples))
    accuracy.reset()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    # Number of distributed processes
    process_num = 3
    # Train the MLP for a few seconds here; spawn hands its weights to every process.
    weights = train_model()
    # Launching distributed with spawn
    torch.multiprocessing.spawn(eval_fn, nprocs=process_num, args=(process_num, weights))

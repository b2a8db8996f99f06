"""MMEval's tutorial: MPI evaluation, on the digits.

Run: mpirun -np 3 python3 examples/digits_dist_eval/eval_mpi4py.py
"""

import torch
from digits_common import get_eval_dataloader, get_model, progress, train_model
from mpi4py import MPI

from mmeval import Accuracy


def eval_fn(rank, process_num, weights):
    eval_dataloader, total_num_samples = get_eval_dataloader(rank, process_num)
    model = get_model(weights)
    # thrs=None: the model's raw logits are ranked as they are (the default
    # thrs=0.0 would count a top-k hit only when the true class scores > 0).
    accuracy = Accuracy(topk=(1, 3), thrs=None, dist_backend="mpi4py")

    with torch.no_grad():
        for images, labels in progress(eval_dataloader, rank):
            predicted_score = model(images)
            accuracy.add(predictions=predicted_score, labels=labels)

    print(accuracy.compute(size=total_num_samples))
    accuracy.reset()


if __name__ == "__main__":
    comm = MPI.COMM_WORLD
    # Rank 0 trains the MLP for a few seconds; every rank evaluates its weights.
    weights = comm.bcast(train_model() if comm.Get_rank() == 0 else None, root=0)
    eval_fn(comm.Get_rank(), comm.Get_size(), weights)

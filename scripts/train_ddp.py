"""Lesson 05's DDP training script: an imbalanced task, DistributedWeightedSampler, set_epoch,
join, per-rank results.

Run from the repository root, one machine (2 CPU ranks on gloo, or one rank per GPU on nccl):
    python -m torch.distributed.run --standalone --nproc-per-node=2 \
        scripts/train_ddp.py --out /tmp/ddp-run
Many machines: see scripts/README.md.
Lines marked `# NEW` are what DDP adds to a one-process loop.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist  # NEW
from torch import nn
from torch.utils.data import DataLoader

# run from a clone without installing helpers
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.data import imbalanced_classification  # noqa: E402
from helpers.imbalance import class_counts, sample_weights  # noqa: E402
from helpers.samplers import DistributedWeightedSampler  # noqa: E402
from helpers.training import small_mlp  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for rank_<N>.json results")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64,
                        help="per rank: the global batch is this x world size")
    parser.add_argument("--num-workers", type=int, default=0,
                        help="per rank: a node runs ranks x (1 + this) processes")
    args = parser.parse_args()

    # one GPU per rank on this node, else CPU ranks on gloo
    # (the lesson's choice, helpers.ddp.choose)
    use_cuda = (torch.cuda.is_available()
                and torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"]))
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend)  # NEW: torchrun set RANK, WORLD_SIZE, MASTER_ADDR/PORT
    rank, world = dist.get_rank(), dist.get_world_size()  # NEW
    local_rank = int(os.environ["LOCAL_RANK"])  # NEW: this rank's GPU on its node
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)  # NEW

    # identical on every rank: same seed
    dataset = imbalanced_classification([4000, 400, 40], seed=0)
    labels = dataset.tensors[1]
    weights = sample_weights(labels, "inverse")
    # each rank its positions of one weighted draw
    sampler = DistributedWeightedSampler(weights, seed=0)  # NEW
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                        num_workers=args.num_workers, pin_memory=use_cuda,
                        persistent_workers=args.num_workers > 0)

    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = small_mlp(16, 3).to(device)
    device_ids = [local_rank] if use_cuda else None
    model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)  # NEW
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    seen = torch.zeros(3, dtype=torch.int64)
    steps, start = 0, time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # NEW: a new draw each epoch, the same on every rank
        # ranks that run out keep answering all-reduces
        with model.join():  # NEW: a safety net (the sampler pads shards evenly)
            for features, target in loader:
                seen += torch.as_tensor(class_counts(target, 3))
                features = features.to(device, non_blocking=True)
                target = target.to(device, non_blocking=True)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(features), target)
                loss.backward()  # DDP all-reduces gradients here
                optimizer.step()
                steps += 1
    seconds = time.perf_counter() - start

    total = seen.clone()
    dist.all_reduce(total)  # NEW: the class mix over all ranks
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"rank": rank, "world_size": world, "backend": dist.get_backend(),
              "device": str(device), "steps": steps, "class_counts": seen.tolist(),
              "all_ranks_class_counts": total.tolist(), "seconds": seconds,
              "global_batch": args.batch_size * world,
              "samples_per_rank_per_epoch": len(sampler),
              "dataset_class_counts": class_counts(labels, 3).tolist()}
    (args.out / f"rank_{rank}.json").write_text(json.dumps(result))
    if rank == 0:
        print(f"{world} ranks on {dist.get_backend()}: {steps} steps per rank, "
              f"class mix over all ranks {total.tolist()}")

    # free the process group's users, then destroy it (avoids the gloo exit crash)
    del model, optimizer, loader  # NEW
    gc.collect()
    dist.destroy_process_group()  # NEW


if __name__ == "__main__":
    main()

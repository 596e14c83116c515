"""DDP training on Gloo (CPU) with checkpoint and resume, as a torchrun user writes it,
measured by elastic-sim through four calls of ``elastic_sim.probe`` (no-ops anywhere else,
so the same script runs under a plain torchrun):

    torchrun --nnodes=1:3 --nproc-per-node=1 --rdzv-backend=c10d \\
        --rdzv-endpoint=HOST:29400 examples/ddp_train.py --steps 200

    elastic-sim run torchelastic/ddp_train --mode torchrun --script examples/ddp_train.py

It prints a line per step (under elastic-sim each worker's output is in the run directory,
``torchrun/logs/``, where torchrun's ``--log-dir`` puts it). Rank 0 saves a checkpoint
every ``--checkpoint-every`` steps and at the end (written beside it, then renamed into
place, so a crash mid-write leaves the one before); a started or restarted worker resumes
from it.
"""

import argparse
import os
import tempfile
import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from elastic_sim import probe


def arguments() -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200, help="steps to train (default 200)")
    ap.add_argument("--step-time", type=float, default=0.1,
                    help="seconds of compute each step stands for (a sleep; default 0.1)")
    ap.add_argument("--checkpoint-every", type=int, default=10, help="default 10")
    ap.add_argument("--checkpoint", default=None,
                    help="the checkpoint file, which every rank reads (shared storage on a "
                         "cluster); default: ddp_train-$TORCHELASTIC_RUN_ID.pt in the "
                         "temporary directory (under elastic-sim, the run directory's)")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds a collective waits for its peers (default 30)")
    return ap.parse_args()


def state_of(model: torch.nn.Module) -> list[Any]:
    """The model's parameters as buffers: what the probe fingerprints (every rank that
    holds the same model gives the same bytes)."""
    return [t.detach().cpu().contiguous().numpy() for t in model.state_dict().values()]


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's batch of ``step``: the same on every run."""
    gen = torch.Generator().manual_seed(step * 1009 + rank)
    x = torch.randn(32, 16, generator=gen)
    return x, x.sum(dim=1, keepdim=True) * 0.1


def save(path: str, model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    """The checkpoint of ``step``, renamed into place once whole."""
    part = f"{path}.part"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
               part)
    os.replace(part, path)


def traced_allreduce(state: object, bucket: dist.GradBucket
                     ) -> torch.futures.Future[torch.Tensor]:
    """DDP's default gradient allreduce (averaged over the world), with the collective
    traced: optional, it lets elastic-sim check that every rank enters the same ones.
    (DDP reads the annotations: this module has no ``from __future__ import
    annotations``.)"""
    tensor = bucket.buffer()
    coll = probe.collective("allreduce", tensor.numel() * tensor.element_size())
    tensor.div_(dist.get_world_size())

    def finished(fut: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        try:
            out = fut.value()[0]
        except Exception as exc:
            coll.failed(exc)
            raise
        coll.done()
        return out

    return dist.all_reduce(tensor, async_op=True).get_future().then(finished)


def main() -> None:
    """Join the job, resume from the last checkpoint, train to the last step."""
    args = arguments()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    path = args.checkpoint or os.path.join(
        tempfile.gettempdir(), f"ddp_train-{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}.pt")
    torch.manual_seed(rank)  # each rank its own initialisation: DDP makes them agree
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if os.path.exists(path):
        ckpt = torch.load(path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start = int(ckpt["step"])
        probe.restore(start, state_of(model))
    ddp = DistributedDataParallel(model)  # broadcasts rank 0's parameters to every rank
    if probe.active():
        ddp.register_comm_hook(None, traced_allreduce)
    probe.sync(start, state_of(model))
    print(f"rank {rank} of {world}: from step {start} ({path})", flush=True)
    for step in range(start + 1, args.steps + 1):
        time.sleep(args.step_time)
        x, y = batch(step, rank)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        probe.step(step)
        print(f"rank {rank} of {world}: step {step} loss {loss.item():.4f}", flush=True)
        if step % args.checkpoint_every == 0 or step == args.steps:
            if rank == 0:
                save(path, model, opt, step)
            dist.barrier()  # every rank knows the checkpoint is on disk
            probe.commit(step, state_of(model))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""dicee 0.3.3 RowWiseShardedEmbedding + its sparse Adam, gloo on CPU, launched with
torch.distributed.run --nproc_per_node 2: the global batch of 65,536 ids is split over the ranks.
Prints the median looked-up rows/s (global) on rank 0."""
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

from dicee.models import fsdp_models as fm  # RowWiseShardedEmbedding, _LocalSparseAdam

N, D, B, STEPS = 1_000_000, 128, 65_536, 7

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
for kind in ("uniform", "zipf"):
    rng = np.random.default_rng(rank)
    emb = fm.RowWiseShardedEmbedding(N, D)
    opt = fm._LocalSparseAdam(emb.parameters(), lr=0.01)
    p = None
    if kind == "zipf":
        p = np.arange(1, N + 1, dtype=np.float64) ** -1.0
        p /= p.sum()
    times = []
    for step in range(STEPS + 1):
        batch = torch.from_numpy(rng.choice(N, size=B // world, p=p) if p is not None else rng.integers(0, N, B // world))
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        rows = emb(batch)
        (rows * 0.01).sum().backward()
        opt.step()
        dist.barrier()
        if step:
            times.append(time.perf_counter() - start)
    if rank == 0:
        t = statistics.median(times)
        print(f"dicee RowWiseShardedEmbedding 2 ranks f32 {kind:8} {B / t / 1e6:.3f} M rows/s ({t * 1e3:.1f} ms/step)")
dist.destroy_process_group()

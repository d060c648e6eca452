"""dicee 0.3.3 RowWiseShardedEmbedding + its _LocalSparseAdam, gloo on CPU, launched with
torch.distributed.run --nproc_per_node 2: the global batch of 65,536 ids is split over the
ranks. Forward (routed lookup), backward (routed gradients) and the sparse Adam step are timed;
prints the median looked-up rows/s (global) on rank 0."""
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

from dicee.models.fsdp_models import RowWiseShardedEmbedding, _LocalSparseAdam

N, D, B, STEPS = 1_000_000, 128, 65_536, 7

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
cpu = torch.device("cpu")
zipf = np.arange(1, N + 1, dtype=np.float64) ** -1.0
zipf /= zipf.sum()
for dtype in (torch.float32, torch.bfloat16):
    for kind in ("uniform", "zipf"):
        rng = np.random.default_rng(rank)
        emb = RowWiseShardedEmbedding(N, D, rank, world, cpu, weight_dtype=dtype)
        opt = _LocalSparseAdam(emb.local_rows, D, lr=0.01, device=cpu, state_dtype=dtype)
        times = []
        for step in range(STEPS + 1):
            if kind == "zipf":
                ids = rng.choice(N, size=B // world, p=zipf)
            else:
                ids = rng.integers(0, N, B // world)
            batch = torch.from_numpy(ids)
            dist.barrier()
            start = time.perf_counter()
            emb.weight.grad = None
            rows = emb(batch)
            (rows.float() * 0.01).sum().backward()
            opt.step(emb.weight.data, emb.weight.grad)
            dist.barrier()
            if step:
                times.append(time.perf_counter() - start)
        if rank == 0:
            t = statistics.median(times)
            print(f"dicee RowWiseShardedEmbedding  {world} ranks {str(dtype):15} {kind:8} "
                  f"{B / t / 1e6:.3f} M rows/s ({t * 1e3:.1f} ms/step)", flush=True)
dist.destroy_process_group()

"""torch nn.Embedding(sparse=True) + SparseAdam on the standard workload: N = 1,000,000, D = 128,
batches of 65,536 ids (uniform and Zipf(1.0)), f32 and bf16; median looked-up rows/s."""
import statistics
import time

import numpy as np
import torch

N, D, B, STEPS = 1_000_000, 128, 65_536, 7


def ids(kind, rng):
    if kind == "uniform":
        return torch.from_numpy(rng.integers(0, N, B))
    ranks = np.arange(1, N + 1, dtype=np.float64)
    p = ranks ** -1.0
    p /= p.sum()
    return torch.from_numpy(rng.choice(N, size=B, p=p))


for dtype in (torch.float32, torch.bfloat16):
    for kind in ("uniform", "zipf"):
        rng = np.random.default_rng(0)
        emb = torch.nn.Embedding(N, D, sparse=True, dtype=dtype)
        opt = torch.optim.SparseAdam(emb.parameters(), lr=0.01)
        times = []
        for step in range(STEPS + 1):
            batch = ids(kind, rng)
            start = time.perf_counter()
            opt.zero_grad()
            rows = emb(batch)
            (rows.float() * 0.01).sum().backward()
            opt.step()
            if step:
                times.append(time.perf_counter() - start)
        t = statistics.median(times)
        print(f"torch SparseAdam  {str(dtype):15} {kind:8} {B / t / 1e6:.3f} M rows/s ({t * 1e3:.1f} ms/step)")

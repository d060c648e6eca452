"""torch's f32 matmul at the dense shapes `rowshard bench-kernels` measures, with and without losses.

For each shape (queries B x table rows E x dim D: one rank's shard, or FB15k-237's whole table
on one rank) it times, median of --repeats:
  scores            S = Q @ W.T                      (B x D) @ (D x E)
  table gradient    dW = G.T @ Q                     (E x B) @ (B x D)
  query gradient    dQ = G @ W                       (B x E) @ (E x D)
  scores + BCE      S, then binary_cross_entropy_with_logits and its gradient dS
  scores + softmax  S, then cross_entropy over the rows and its gradient dS
  KvsAll step       S, BCE, backward to Q and W (autograd: the three products and the loss)
and prints GFLOP/s counting 2*D flops per query-row pair and product, as rowshard does.

Run (peers venv): OMP_NUM_THREADS=2 python benches/peers/torch_dense.py --threads 2
"""
import argparse
import os
import time

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("--threads", type=int, default=os.cpu_count())
cli.add_argument("--repeats", type=int, default=15)
cli.add_argument("--rounds", type=int, default=1,
                 help="repeat the whole table this many times (interleave with rowshard's runs)")
opts = cli.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(opts.threads)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(opts.threads)
SHAPES = [("FB15k-237 shard", 1024, 7253, 128), ("FB15k-237 whole", 1024, 14505, 128),
          ("FB15k-237 shard", 1024, 7253, 256), ("shared negatives", 2048, 256, 128), ("shared, a rank of 2", 1024, 256, 128),
          ("UMLS shard", 512, 68, 32)]


def median_time(f, repeats):
    f()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def figures(b, e, d):
    g = torch.Generator().manual_seed(7)
    q = torch.rand(b, d, generator=g) - 0.5
    w = torch.rand(e, d, generator=g) - 0.5
    grad = torch.rand(b, e, generator=g) * 1e-6
    targets = torch.zeros(b, e)
    targets[torch.arange(b).repeat_interleave(4), torch.randint(0, e, (4 * b,), generator=g)] = 1.0
    truth = torch.randint(0, e, (b,), generator=g)

    def bce():
        s = (q @ w.T).requires_grad_()
        F.binary_cross_entropy_with_logits(s, targets).backward()

    def softmax():
        s = (q @ w.T).requires_grad_()
        F.cross_entropy(s, truth).backward()

    def kvsall():
        qq = q.clone().requires_grad_()
        ww = w.clone().requires_grad_()
        F.binary_cross_entropy_with_logits(qq @ ww.T, targets).backward()

    with torch.no_grad():
        plain = [("scores", 1, lambda: q @ w.T), ("table gradient G.Q", 1, lambda: grad.T @ q),
                 ("query gradient G.W", 1, lambda: grad @ w)]
    out = [(what, n, f) for what, n, f in plain]
    out += [("scores + BCE (forward, backward to S)", 1, bce),
            ("scores + softmax CE (forward, backward to S)", 1, softmax),
            ("KvsAll step: BCE, backward to Q and W", 3, kvsall)]
    return out


print(f"torch {torch.__version__}, {opts.threads} threads, median of {opts.repeats}; GFLOP/s count "
      "2*dim flops per query-row pair and product")
print(f"{'shape':<16} {'queries':>7} {'rows':>6} {'dim':>4} {'what':<46} {'ms':>9} {'GFLOP/s':>9}")
for _ in range(opts.rounds):
    for label, b, e, d in SHAPES:
        for what, products, f in figures(b, e, d):
            t = median_time(f, opts.repeats)
            gflops = 2 * d * b * e * products / t / 1e9
            print(f"{label:<16} {b:>7} {e:>6} {d:>4} {what:<46} {t * 1e3:>9.2f} {gflops:>9.1f}",
                  flush=True)

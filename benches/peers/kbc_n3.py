"""A plain PyTorch 1vsAll ComplEx-N3 trainer: the N3 paper's reference code, rewritten standalone.

Lacroix, Usunier, Obozinski, "Canonical Tensor Decomposition for Knowledge Base Completion"
(ICML 2018), github.com/facebookresearch/kbc: ComplEx of rank R (2R reals per row), every
training triple and its reciprocal `(t, r + |R|, h)` scored against every entity, softmax
cross-entropy against its true tail (mean over the batch), N3 regularisation of the moduli of
the head, relation and true tail (`weight * sum |x|^3 / batch`), Adagrad (lr 0.1) on sparse
embedding gradients, N(0, 1) * 1e-3 initialisation, batch 100, a shuffle per epoch. The math is
kbc's; the evaluation is rowshard's protocol so the figures compare: filtered MRR and Hits@k
over tail prediction of (h, r, ?) and (t, r^-1, ?), ties counted half.

Prints, per evaluation, a JSON line {"epoch", "train_seconds", "valid": {...}} (and "test" at the
end), plus each epoch's time and effective GFLOP/s (6 * 2R flops per query-entity pair: scores,
entity gradient, query gradient).

Run (peers venv): python benches/peers/kbc_n3.py path/to/fb15k-237 --threads 2
"""
import argparse
import json
import os
import time

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("dataset_dir")
cli.add_argument("--rank", type=int, default=64, help="complex rank: rows hold 2 * rank reals")
cli.add_argument("--epochs", type=int, default=6)
cli.add_argument("--batch-size", type=int, default=100)
cli.add_argument("--lr", type=float, default=0.1)
cli.add_argument("--reg", type=float, default=0.05, help="N3 weight")
cli.add_argument("--init", type=float, default=1e-3)
cli.add_argument("--eval-every", type=int, default=1)
cli.add_argument("--minutes", type=float, default=0.0, help="stop after this much training time")
cli.add_argument("--threads", type=int, default=os.cpu_count())
cli.add_argument("--seed", type=int, default=0)
opts = cli.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(opts.threads)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

torch.set_num_threads(opts.threads)
torch.manual_seed(opts.seed)


def read(split):
    with open(os.path.join(opts.dataset_dir, f"{split}.txt")) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


raw = {s: read(s) for s in ("train", "valid", "test")}
# Entities and relations numbered in sorted order of their names over every split (rowshard's
# numbering; kbc's differs only by a permutation).
ents = sorted({x for s in raw.values() for h, _, t in s for x in (h, t)})
rels = sorted({r for s in raw.values() for _, r, _ in s})
E, R = {e: i for i, e in enumerate(ents)}, {r: i for i, r in enumerate(rels)}
seen_e = {x for h, _, t in raw["train"] for x in (E[h], E[t])}
seen_r = {R[r] for _, r, _ in raw["train"]}
data = {}
for split, rows in raw.items():
    triples = np.array([[E[h], R[r], E[t]] for h, r, t in rows], dtype=np.int64)
    if split != "train":  # leave out triples with entities or relations unseen in training
        keep = [h in seen_e and t in seen_e and r in seen_r for h, r, t in triples]
        triples = triples[np.array(keep, dtype=bool)]
    data[split] = triples
n_ent, n_rel = len(ents), len(rels)


def with_reciprocals(t):
    inverse = np.stack([t[:, 2], t[:, 1] + n_rel, t[:, 0]], axis=1)
    return np.concatenate([t, inverse])


train = torch.from_numpy(with_reciprocals(data["train"]))
known = {}
for t in with_reciprocals(np.concatenate([data[s] for s in ("train", "valid", "test")])):
    known.setdefault((int(t[0]), int(t[1])), set()).add(int(t[2]))


class ComplEx(nn.Module):
    def __init__(self, rank, init):
        super().__init__()
        self.rank = rank
        self.ent = nn.Embedding(n_ent, 2 * rank, sparse=True)
        self.rel = nn.Embedding(2 * n_rel, 2 * rank, sparse=True)
        self.ent.weight.data *= init
        self.rel.weight.data *= init

    def queries(self, x):
        lhs, rel = self.ent(x[:, 0]), self.rel(x[:, 1])
        k = self.rank
        return torch.cat([lhs[:, :k] * rel[:, :k] - lhs[:, k:] * rel[:, k:],
                          lhs[:, :k] * rel[:, k:] + lhs[:, k:] * rel[:, :k]], 1), lhs, rel

    def forward(self, x):
        q, lhs, rel = self.queries(x)
        rhs = self.ent(x[:, 2])
        k = self.rank
        modulus = lambda v: torch.sqrt(v[:, :k] ** 2 + v[:, k:] ** 2)  # noqa: E731
        return q @ self.ent.weight.t(), (modulus(lhs), modulus(rel), modulus(rhs))


model = ComplEx(opts.rank, opts.init)
optimizer = torch.optim.Adagrad(model.parameters(), lr=opts.lr)
ce = nn.CrossEntropyLoss(reduction="mean")


@torch.no_grad()
def evaluate(split, chunk=1000):
    triples = torch.from_numpy(with_reciprocals(data[split]))
    sums = np.zeros(4)
    for i in range(0, len(triples), chunk):
        x = triples[i:i + chunk]
        scores = model.queries(x)[0] @ model.ent.weight.t()
        truth = scores[torch.arange(len(x)), x[:, 2]].clone()
        for j, (h, r, t) in enumerate(x.tolist()):
            skip = list(known[(h, r)])
            scores[j, skip] = float("-inf")  # the answer too: it is counted below
        better = (scores > truth[:, None]).sum(1).double()
        tied = (scores == truth[:, None]).sum(1).double()
        rank = 1 + better + tied / 2
        sums += [(1 / rank).sum().item(), (rank <= 1).sum().item(), (rank <= 3).sum().item(),
                 (rank <= 10).sum().item()]
    n = len(triples)
    return {"mrr": sums[0] / n, "hits@1": sums[1] / n, "hits@3": sums[2] / n,
            "hits@10": sums[3] / n, "queries": n}


trained = 0.0
pairs = len(train) * n_ent
for epoch in range(1, opts.epochs + 1):
    start = time.perf_counter()
    order = train[torch.randperm(len(train))]
    total = 0.0
    for i in range(0, len(order), opts.batch_size):
        x = order[i:i + opts.batch_size]
        scores, factors = model(x)
        l_fit = ce(scores, x[:, 2])
        l_reg = opts.reg * sum(torch.sum(torch.abs(f) ** 3) for f in factors) / len(x)
        loss = l_fit + l_reg
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += l_fit.item() * len(x)
    seconds = time.perf_counter() - start
    trained += seconds
    gflops = 6 * 2 * opts.rank * pairs / seconds / 1e9
    print(f"epoch {epoch}: {seconds:.1f} s, loss {total / len(order):.4f}, "
          f"{gflops:.0f} effective GFLOP/s", flush=True)
    if opts.eval_every and epoch % opts.eval_every == 0:
        print(json.dumps({"epoch": epoch, "train_seconds": round(trained, 1),
                          "valid": evaluate("valid")}), flush=True)
    if opts.minutes and trained >= 60 * opts.minutes:
        break
print(json.dumps({"epoch": epoch, "train_seconds": round(trained, 1), "valid": evaluate("valid"),
                  "test": evaluate("test")}), flush=True)

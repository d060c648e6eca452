"""Time PyKEEN 1.11's LCWA (= KvsAll) training loop on a triples folder and print one JSON line.

ComplEx with `embedding_dim` complex numbers per row (`--dim 64` = 128 reals, rowshard's dim 128),
binary cross-entropy on every (head, relation) x entity score (PyKEEN's default LCWA loss for
ComplEx is BCEWithLogits), Adam, batch 1024, reciprocal relations as PyKEEN creates them
(`create_inverse_triples=True`). Printed: seconds per epoch (the training loop alone, after the
model and the triples factory are built), the LCWA queries per epoch and the effective GFLOP/s
(6 * 2 * dim flops per query-entity pair).

Run (peers venv): python benches/peers/pykeen_lcwa.py path/to/fb15k-237 --threads 2
"""
import argparse
import json
import os
import time

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("dataset_dir")
cli.add_argument("--dim", type=int, default=64, help="complex dimension (rows hold 2 * dim reals)")
cli.add_argument("--epochs", type=int, default=1)
cli.add_argument("--batch-size", type=int, default=1024)
cli.add_argument("--lr", type=float, default=0.001)
cli.add_argument("--threads", type=int, default=os.cpu_count())
opts = cli.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(opts.threads)
import torch  # noqa: E402
from pykeen.models import ComplEx  # noqa: E402
from pykeen.training import LCWATrainingLoop  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402

torch.set_num_threads(opts.threads)
train = TriplesFactory.from_path(os.path.join(opts.dataset_dir, "train.txt"),
                                 create_inverse_triples=True)
model = ComplEx(triples_factory=train, embedding_dim=opts.dim, random_seed=1)
optimizer = torch.optim.Adam(model.parameters(), lr=opts.lr)
loop = LCWATrainingLoop(model=model, triples_factory=train, optimizer=optimizer)
start = time.perf_counter()
losses = loop.train(triples_factory=train, num_epochs=opts.epochs, batch_size=opts.batch_size,
                    use_tqdm=False)
seconds = (time.perf_counter() - start) / opts.epochs
# LCWA's queries: the distinct (head, relation) pairs of the training triples and of their
# inverses, (tail, relation⁻¹); `mapped_triples` holds the originals only.
mapped = train.mapped_triples
queries = (len(torch.unique(mapped[:, [0, 1]], dim=0))
           + len(torch.unique(mapped[:, [2, 1]], dim=0)))
pairs = queries * train.num_entities
print(json.dumps({
    "system": f"pykeen LCWA ComplEx dim {opts.dim} (x2 reals)",
    "threads": opts.threads,
    "epoch_seconds": round(seconds, 2),
    "queries_per_epoch": queries,
    "entities": train.num_entities,
    "effective_gflops": round(6 * 2 * opts.dim * pairs / seconds / 1e9, 1),
    "loss": losses[-1],
}))

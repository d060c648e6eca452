"""Time PyKEEN 1.11's sLCWA (negative sampling) training loop on the synthetic graph of
`rowshard bench --suite negatives` and print one JSON line.

The graph of `make_synthetic_kg.py` (a million entities, 100 relations), ComplEx with `--dim`
complex numbers per row (64 = 128 reals, rowshard's dim 128), `--negatives` independent
corruptions per true triple (PyKEEN's `BasicNegativeSampler`: the head or the tail, drawn
uniformly; PyKEEN cannot share negatives between triples), PyKEEN's default sLCWA loss for
ComplEx (`softplus`, the logistic loss) unless `--loss` names another, batches of 1,024 true
triples, Adagrad lr 0.1. PyKEEN's embeddings are dense tensors, so torch's Adagrad updates the
whole table every step (rowshard's row-wise AdaGrad touches only the step's rows); that is what a
PyKEEN user gets. The loop trains one epoch over the first `--triples` training triples (every
entity stays in the table); printed: the loop's seconds and true triples per second.

Run (peers venv): python benches/peers/pykeen_slcwa.py /tmp/synthetic_kg --threads 2
"""
import argparse
import json
import os
import time

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("data", help="a folder with train.txt (make_synthetic_kg.py)")
cli.add_argument("--entities", type=int, default=1_000_000)
cli.add_argument("--relations", type=int, default=100)
cli.add_argument("--triples", type=int, default=20_480, help="training triples timed")
cli.add_argument("--negatives", type=int, default=16, help="corruptions per true triple")
cli.add_argument("--loss", default="softplus", help="a PyKEEN loss: softplus, nssa, ...")
cli.add_argument("--dim", type=int, default=64, help="complex dimension (rows hold 2 * dim reals)")
cli.add_argument("--batch-size", type=int, default=1024)
cli.add_argument("--lr", type=float, default=0.1)
cli.add_argument("--threads", type=int, default=os.cpu_count())
opts = cli.parse_args()
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(opts.threads)
import torch  # noqa: E402
from pykeen.models import ComplEx  # noqa: E402
from pykeen.training import SLCWATrainingLoop  # noqa: E402
from pykeen.triples import TriplesFactory  # noqa: E402

torch.set_num_threads(opts.threads)
entity_to_id = {f"e{i}": i for i in range(opts.entities)}
relation_to_id = {f"r{i}": i for i in range(opts.relations)}
rows = []
with open(os.path.join(opts.data, "train.txt")) as f:
    for line in f:
        if len(rows) == opts.triples:
            break
        h, r, t = line.rstrip("\n").split("\t")
        rows.append((entity_to_id[h], relation_to_id[r], entity_to_id[t]))
train = TriplesFactory(mapped_triples=torch.tensor(rows, dtype=torch.long),
                       entity_to_id=entity_to_id, relation_to_id=relation_to_id)
model = ComplEx(triples_factory=train, embedding_dim=opts.dim, loss=opts.loss, random_seed=1)
optimizer = torch.optim.Adagrad(model.parameters(), lr=opts.lr)
loop = SLCWATrainingLoop(model=model, triples_factory=train, optimizer=optimizer,
                         negative_sampler="basic",
                         negative_sampler_kwargs=dict(num_negs_per_pos=opts.negatives))
start = time.perf_counter()
losses = loop.train(triples_factory=train, num_epochs=1, batch_size=opts.batch_size,
                    use_tqdm=False)
seconds = time.perf_counter() - start
print(json.dumps({
    "system": f"pykeen sLCWA ComplEx dim {opts.dim} (x2 reals), {opts.loss}, "
              f"{opts.negatives} negatives per triple, Adagrad",
    "threads": opts.threads,
    "entities": train.num_entities,
    "triples": len(rows),
    "seconds": round(seconds, 2),
    "triples_per_s": round(len(rows) / seconds),
    "loss": losses[-1],
}))

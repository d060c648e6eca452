"""Write a random knowledge graph in the layout dicee reads: <out>/{train,valid,test}.txt, one
tab-separated `head<TAB>relation<TAB>tail` per line, entities `e<i>`, relations `r<j>`, ids drawn
uniformly at random (seeded). The heads of the first --entities training triples are a random
permutation, so that every entity occurs (dicee builds its vocabulary from the files).

Run: python3 benches/peers/make_synthetic_kg.py /tmp/synthetic_kg \
         --entities 1000000 --relations 100 --train 2000000 --valid 10 --test 10
(needs only numpy; the peers venv has it)
"""
import argparse
import os

import numpy as np

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("out")
cli.add_argument("--entities", type=int, default=1_000_000)
cli.add_argument("--relations", type=int, default=100)
cli.add_argument("--train", type=int, default=2_000_000)
cli.add_argument("--valid", type=int, default=10)
cli.add_argument("--test", type=int, default=10)
cli.add_argument("--seed", type=int, default=0)
opts = cli.parse_args()

rng = np.random.default_rng(opts.seed)
os.makedirs(opts.out, exist_ok=True)
for split, count in (("train", opts.train), ("valid", opts.valid), ("test", opts.test)):
    h = rng.integers(0, opts.entities, count)
    r = rng.integers(0, opts.relations, count)
    t = rng.integers(0, opts.entities, count)
    if split == "train" and count >= opts.entities:
        h[:opts.entities] = rng.permutation(opts.entities)
    with open(os.path.join(opts.out, f"{split}.txt"), "w") as f:
        f.writelines(f"e{a}\tr{b}\te{c}\n" for a, b, c in zip(h, r, t))
print(f"wrote {opts.train}/{opts.valid}/{opts.test} triples to {opts.out}")

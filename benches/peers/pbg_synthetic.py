"""PyTorch-BigGraph on the synthetic graph of `rowshard bench --suite negatives`: ComplEx
(PBG's `complex_diagonal` operator, `dot` comparator), dim 128, row-wise AdaGrad (PBG's own
optimizer for entities), softmax loss, shared negatives (`--uniform` per chunk; without batch
negatives PBG's chunk is as long as the uniform sample, with `--batch-negs` that many edges),
both sides of every edge corrupted (dynamic relations), one partition, `--workers` Hogwild
workers. Prints the edges (true triples) per second of one epoch.

Run: python3 benches/peers/make_synthetic_kg.py /tmp/synthetic_kg --entities 1000000 \
         --relations 100 --train 2000000
     python3 benches/peers/pbg_synthetic.py /tmp/synthetic_kg --workers 2
(needs torchbiggraph 1.0.0, h5py, attrs and setuptools < 81 in the peers venv; see run.sh)
"""
import argparse
import os
import shutil
import time
from pathlib import Path

import typing

import torchbiggraph.schema


def unpack_optional(type_):
    """PBG 1.0.0's test of `Optional[T]` by identity fails on Python ≥ 3.9; by equality."""
    args = getattr(type_, "__args__", None)
    if not args or type_ != typing.Optional[args[0]]:
        raise TypeError("Not an optional type")
    return args[0]


torchbiggraph.schema.unpack_optional = unpack_optional

from torchbiggraph.config import ConfigSchema  # noqa: E402
from torchbiggraph.converters.import_from_tsv import convert_input_data  # noqa: E402
from torchbiggraph.train import train  # noqa: E402
from torchbiggraph.util import SubprocessInitializer, setup_logging  # noqa: E402

def main():
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("data", help="a folder with train.txt (make_synthetic_kg.py)")
    cli.add_argument("--workers", type=int, default=2)
    cli.add_argument("--uniform", type=int, default=256, help="uniform negatives per chunk")
    cli.add_argument("--batch-negs", type=int, default=0, help="batch negatives per chunk")
    cli.add_argument("--chunk", type=int, default=1000, help="edges per batch (PBG's batch_size)")
    cli.add_argument("--dim", type=int, default=128)
    cli.add_argument("--work", default="/tmp/pbg_work")
    opts = cli.parse_args()

    setup_logging()
    work = Path(opts.work)
    config = ConfigSchema.from_dict(dict(
        entity_path=str(work / "entities"),
        edge_paths=[str(work / "train_partitioned")],
        checkpoint_path=str(work / "model"),
        entities={"all": {"num_partitions": 1}},
        relations=[{
            "name": "all_edges", "lhs": "all", "rhs": "all", "operator": "complex_diagonal",
        }],
        dynamic_relations=True,
        dimension=opts.dim,
        global_emb=False,
        comparator="dot",
        num_epochs=1,
        batch_size=opts.chunk,
        num_uniform_negs=opts.uniform,
        num_batch_negs=opts.batch_negs,
        loss_fn="softmax",
        lr=0.1,
        workers=opts.workers,
        eval_fraction=0,
    ))
    if not (work / "train_partitioned").exists():
        start = time.time()
        convert_input_data(
            config.entities, config.relations, config.entity_path, config.edge_paths,
            [Path(opts.data) / "train.txt"], lhs_col=0, rhs_col=2, rel_col=1,
            dynamic_relations=config.dynamic_relations,
        )
        print(f"converted in {time.time() - start:.1f} s")
    edges = sum(1 for _ in open(Path(opts.data) / "train.txt"))
    shutil.rmtree(work / "model", ignore_errors=True)  # else PBG resumes a finished run
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    start = time.time()
    train(config, subprocess_init=SubprocessInitializer())
    seconds = time.time() - start
    print(f"PBG: {edges} edges in {seconds:.1f} s = {edges / seconds:.0f} edges/s "
          f"({opts.workers} workers, {opts.uniform} uniform + {opts.batch_negs} batch negatives, "
          f"batches of {opts.chunk}, dim {opts.dim})")


if __name__ == "__main__":  # PBG's workers re-import this file (spawn)
    main()

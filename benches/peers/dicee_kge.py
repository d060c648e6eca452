"""Train a knowledge-graph embedding with dicee 0.3.3's own pipeline and print one JSON line.

It builds dicee's command-line arguments (`dicee.scripts.run.get_default_arguments`, so every
option we do not set keeps the CLI's default) and runs `dicee.executer.Execute(args).start()`,
which is exactly what `dicee.scripts.run.main()` does, but returns dicee's report to us. dicee
writes its run folder (model, vocabularies, memory maps) and Lightning its ./checkpoints/ under a
temporary directory (the script chdirs there), deleted afterwards unless --keep is given.

Printed: the wall-clock time of the training loop alone (the trainer's `fit`: all epochs plus
Lightning's end-of-fit checkpoint; the data set and model are built before it), dicee's total runtime (reading, indexing, training,
saving, evaluating), the triples trained on (original + dicee's reciprocal triples for KvsAll),
the data points per epoch (unique (head, relation) pairs for KvsAll, triples for NegSample),
the filtered valid and test MRR and Hits@1/3/10 that dicee reports, and the peak RSS.

Careful: `--eval None` also makes dicee skip the reciprocal triples (KvsAll then trains on the
original triples only). Offline: dicee's `KG` calls `tiktoken.get_encoding("gpt2")` for every graph, which downloads a
BPE file; it is only used for byte-pair-encoded models, so a stub replaces it here.

Run (in the peers venv of run.sh):
  OMP_NUM_THREADS=1 ~/.cache/rowshard-peers-venv/bin/python benches/peers/dicee_kge.py \
      datasets/umls --model DistMult --dim 32 --epochs 256 --batch-size 1024 \
      --lr 0.1 --scoring KvsAll --seed 1 --threads 1
"""
import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
cli.add_argument("dataset_dir", help="folder with train.txt, valid.txt, test.txt (head rel tail)")
cli.add_argument("--model", default="DistMult", choices=["DistMult", "ComplEx"])
cli.add_argument("--dim", type=int, default=32)
cli.add_argument("--epochs", type=int, default=256)
cli.add_argument("--batch-size", type=int, default=1024)
cli.add_argument("--lr", type=float, default=0.1)
cli.add_argument("--optim", default="Adam", help="dicee's CLI default is Adopt; we use Adam")
cli.add_argument("--scoring", default="KvsAll", choices=["KvsAll", "NegSample"])
cli.add_argument("--neg-ratio", type=int, default=2, help="negatives per positive (NegSample; CLI default 2)")
cli.add_argument("--seed", type=int, default=1)
cli.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
cli.add_argument("--trainer", default="PL", choices=["PL", "torchCPUTrainer"],
                 help="PL (Lightning) is the CLI default")
cli.add_argument("--eval", default="val_test", help="dicee --eval_model, e.g. val_test or None")
cli.add_argument("--max-steps", type=int, default=-1,
                 help="stop after this many batches (PL trainer only; for graphs too big for an epoch)")
cli.add_argument("--keep", action="store_true", help="keep dicee's run folder and print its path")
opts = cli.parse_args()

# Threads must be fixed before torch starts its OpenMP pool.
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(opts.threads)
import torch  # noqa: E402

torch.set_num_threads(opts.threads)

import tiktoken  # noqa: E402


class _NoBpe:
    """Stands in for tiktoken's GPT-2 encoding; dicee only uses it for BPE models."""
    n_vocab = 50257

    def encode(self, text):
        return [220] * max(1, len(text))


tiktoken.get_encoding = lambda name: _NoBpe()

from dicee.executer import Execute  # noqa: E402
from dicee.scripts.run import get_default_arguments  # noqa: E402
from dicee.trainer.dice_trainer import DICE_Trainer  # noqa: E402

# Time the training loop alone: wrap the fit method of the trainer dicee creates.
timing = {}
_make_trainer = DICE_Trainer.initialize_trainer


def _timed_trainer(self, callbacks):
    trainer = _make_trainer(self, callbacks)
    fit = trainer.fit

    def timed_fit(*args, train_dataloaders, **kwargs):
        timing["data_points_per_epoch"] = len(train_dataloaders.dataset)
        timing["batches_per_epoch"] = len(train_dataloaders)
        start = time.perf_counter()
        result = fit(*args, train_dataloaders=train_dataloaders, **kwargs)
        timing["train_seconds"] = time.perf_counter() - start
        timing["steps"] = getattr(trainer, "global_step", None)  # Lightning counts optimizer steps
        return result

    trainer.fit = timed_fit
    return trainer


DICE_Trainer.initialize_trainer = _timed_trainer

work = tempfile.mkdtemp(prefix="dicee_kge_")
dataset_dir = os.path.abspath(opts.dataset_dir)
os.chdir(work)  # Lightning's default ModelCheckpoint writes ./checkpoints/ in the working directory
args = get_default_arguments([
    "--dataset_dir", dataset_dir,
    "--path_to_store_single_run", os.path.join(work, "run"),
    "--model", opts.model, "--embedding_dim", str(opts.dim), "--num_epochs", str(opts.epochs),
    "--batch_size", str(opts.batch_size), "--lr", str(opts.lr), "--optim", opts.optim,
    "--scoring_technique", opts.scoring, "--neg_ratio", str(opts.neg_ratio),
    "--random_seed", str(opts.seed), "--trainer", opts.trainer, "--eval_model", opts.eval,
    "--num_core", "0",
    # dicee passes pl_trainer_kwargs["max_step"] to Lightning's Trainer(max_steps=...).
    "--pl_trainer_kwargs", json.dumps({"max_step": opts.max_steps}),
])
start = time.perf_counter()
execute = Execute(args)
try:
    report, error = execute.start(), None
except Exception as exc:  # e.g. MemoryError in evaluation: still report the training time
    report, error = execute.report, f"{type(exc).__name__}: {exc}"
total = time.perf_counter() - start

points = timing.get("data_points_per_epoch") or 1
steps = timing.get("steps")
if opts.max_steps > 0 and steps is not None:  # partial epoch: fraction of the data points seen
    per_epoch = timing["batches_per_epoch"]
    epochs_done = steps // per_epoch + min((steps % per_epoch) * opts.batch_size / points, 1)
else:
    epochs_done = opts.epochs


def metrics(split):
    m = report.get(split) or {}
    return {k: round(float(m[k]), 4) for k in ("MRR", "H@1", "H@3", "H@10") if k in m}


print(json.dumps({
    "model": opts.model, "scoring": opts.scoring, "dim": opts.dim, "epochs": opts.epochs,
    "batch_size": opts.batch_size, "lr": opts.lr, "optim": opts.optim, "seed": opts.seed,
    "trainer": opts.trainer, "threads": torch.get_num_threads(),
    "entities": report.get("num_entities"), "relations": report.get("num_relations"),
    "train_triples": report.get("num_train_triples"),
    "data_points_per_epoch": timing.get("data_points_per_epoch"),
    "batches_per_epoch": timing.get("batches_per_epoch"),
    "train_seconds": round(timing.get("train_seconds", float("nan")), 3),
    "total_seconds": round(total, 3),
    "steps": timing.get("steps"),
    # Triples covered per second: a KvsAll data point covers all known tails of its (h, r) pair.
    "triples_per_second": round(report.get("num_train_triples", 0) * epochs_done
                                / timing.get("train_seconds", float("nan")), 1),
    "valid": metrics("Val"), "test": metrics("Test"),
    # ru_maxrss is in KiB on Linux; children are dicee's vocabulary worker processes.
    "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "peak_rss_children_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    "run_dir": os.path.join(work, "run") if opts.keep else None,
    "error": error,
}), flush=True)
if not opts.keep:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if error else 0)

"""The pairs task's data path in a process of its own, to its first training step (the
`corpus_*` benchmarks run it and watch its memory from outside).

`python -m experiments.bench.corpus_probe CONFIG_JSON` validates the config (a `pairs`
task), builds the task (reading, splitting, learning the tokenizer on its sample, encoding
into the cached store, or finding it there), builds the model, and takes one training step
on the first length-bucketed batch; it prints one JSON line: the seconds of each part, what
the corpus counted, and the process's peak resident memory (`VmHWM`).
"""

from __future__ import annotations

import json
import sys
import time


def main(config: dict) -> dict:
    started = time.perf_counter()
    from experiments.training import run  # noqa: PLC0415 - the frameworks are part of the time
    from experiments.training.batches import epoch_batches  # noqa: PLC0415

    imported = time.perf_counter()
    prepared = run.validate(config)
    cfg, task = prepared.cfg, prepared.task
    built = time.perf_counter()
    model = task.kind.build_model(cfg, task)
    run.compile_model(model, cfg, task)
    batches = epoch_batches(
        task.train, cfg.train.batch_size, cfg.train.seed, **run.feed_options(cfg)
    )
    x, y = batches[0]
    model.train_on_batch(x, y)
    stepped = time.perf_counter()
    return {
        "import_s": imported - started,
        "data_s": built - imported,
        "first_step_s": stepped - started,
        "train_rows": len(task.train),
        "val_rows": len(task.val),
        "test_rows": len(task.test),
        "data_counts": task.data_counts,
        "duplicate_rows": task.duplicate_rows,
        "batches_per_epoch": len(batches),
        "vmhwm_kb": _status("VmHWM"),
    }


def _status(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))

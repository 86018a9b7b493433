"""BLEU and chrF of a finished seq2seq run's model, greedy and with beam search at several
length penalties: what `generate(sampler="beam")` should default to.

    MLFLOW_TRACKING_URI=... python tools/length_penalty.py RUN_ID [RUN_ID ...] \
        [--beam-width 4] [--penalties 0 0.6 1.0]

For each run: its logged `.keras` model (the text model's artifact), its task rebuilt from
the run's logged config (the same seed: the same split and tokenizer), and the whole test
split decoded greedy and with beam search at each length penalty, scored as the run scores
(sacrebleu on the detokenised strings against the targets as written). Prints a Markdown
table: a row per run, a column per decoding.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import keras
import mlflow
import yaml

import keras_attn_rnn  # noqa: F401 - registers the layers for load_model
from experiments.config import validate
from experiments.data import modeling, text_scores
from experiments.kinds import seq2seq
from experiments.tasks import build_task
from keras_attn_rnn import samplers


def scores(run_id: str, beam_width: int, penalties: list[float]) -> dict[str, tuple]:
    client = mlflow.MlflowClient()
    run = client.get_run(run_id)
    config = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="config.yaml"))
    cfg = validate(yaml.safe_load(config.read_text(encoding="utf-8")))
    task = build_task(cfg.task)
    folder = Path(mlflow.artifacts.download_artifacts(run.data.tags["text_model_uri"]))
    model = keras.saving.load_model(folder / "artifacts" / "model.keras", safe_mode=True)
    split = task.test
    references = [target for _, target in split.texts]
    decoders = {"greedy": modeling.GREEDY}
    for penalty in penalties:
        decoders[f"beam lp={penalty:g}"] = samplers.BeamSampler(beam_width, length_penalty=penalty)
    out = {}
    for name, sampler in decoders.items():
        decoded = modeling.decode(
            model,
            sampler,
            split.x,
            split.y.shape[1],
            batch_size=seq2seq.EVAL_BATCH,
            **seq2seq.Seq2Seq.decode_ids,
        )
        hypotheses = [task.output_vocab.decode(row) for row in decoded]
        found = text_scores.corpus_scores(hypotheses, references, task.bleu_tokenize)
        mean_length = sum(len(h.split()) for h in hypotheses) / len(hypotheses)
        out[name] = (found["bleu"], found["chrf"], mean_length)
    out["references"] = (100.0, 100.0, sum(len(t.split()) for t in references) / len(references))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--beam-width", type=int, default=4)
    parser.add_argument("--penalties", type=float, nargs="+", default=[0.0, 0.6, 1.0])
    args = parser.parse_args(argv)
    rows = {run: scores(run, args.beam_width, args.penalties) for run in args.runs}
    names = list(next(iter(rows.values())))
    print("| run | " + " | ".join(f"{n}: BLEU / chrF / words" for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for run, found in rows.items():
        cells = [f"{b:.1f} / {c:.1f} / {w:.1f}" for b, c, w in found.values()]
        print(f"| {run[:8]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

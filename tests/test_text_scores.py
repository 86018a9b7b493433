"""BLEU and chrF of generated text: the runner's figures are sacrebleu's own command line's
on the same files."""

import subprocess
import sys

import pytest

from experiments.data import text_scores

HYPOTHESES = ["le chat est assis sur le tapis", "un chien court", "Fichier introuvable", ""]
REFERENCES = ["le chat est sur le tapis", "un chien court vite", "Fichier introuvable", "vide"]


def sacrebleu_cli(tmp_path, hypotheses, references, *options):
    (tmp_path / "hyp.txt").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "sacrebleu", str(tmp_path / "ref.txt"), "-i"]
    command += [
        str(tmp_path / "hyp.txt"),
        "-m",
        "bleu",
        "chrf",
        "-b",
        "-f",
        "text",
        "-w",
        "4",
        *options,
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return [float(line) for line in out.split()]


@pytest.mark.parametrize("tokenize", ["13a", "char"])
def test_scores_are_sacrebleus_command_line_figures(tmp_path, tokenize):
    scores = text_scores.corpus_scores(HYPOTHESES, REFERENCES, tokenize=tokenize)
    bleu, chrf = sacrebleu_cli(tmp_path, HYPOTHESES, REFERENCES, "--tokenize", tokenize)
    assert scores["bleu"] == pytest.approx(bleu, abs=1e-4)  # the CLI prints 4 decimals (-w 4)
    assert scores["chrf"] == pytest.approx(chrf, abs=1e-4)
    assert scores["exact_match"] == 0.25
    assert 0 < scores["bleu"] < 100 and 0 < scores["chrf"] < 100


def test_perfect_and_empty_and_mismatched():
    assert text_scores.corpus_scores(REFERENCES, REFERENCES)["bleu"] == pytest.approx(100.0)
    assert text_scores.corpus_scores([], []) == {"bleu": 0.0, "chrf": 0.0, "exact_match": 0.0}
    with pytest.raises(ValueError, match=r"one reference per hypothesis. Received: 1 hypotheses"):
        text_scores.corpus_scores(["a"], ["a", "b"])
    signatures = text_scores.signatures()
    assert "tok:13a" in signatures["bleu"] and "nc:6" in signatures["chrf"]

"""The field's scores of generated text: corpus BLEU and chrF by sacrebleu, on detokenised
strings, beside exact match.

sacrebleu's defaults are the published ones: BLEU with its `13a` tokenisation and
exponential smoothing (`tokenize` may name another of sacrebleu's, e.g. `zh`, `char`,
`intl`), chrF with character 6-grams and beta 2 (chrF2, not chrF++). Each score comes
with sacrebleu's signature (`nrefs:1|case:mixed|eff:no|tok:13a|...`), which says how it
was computed: a run logs it, so its figures compare with anyone's who reports the same
signature.
"""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import BLEU, CHRF


def corpus_scores(
    hypotheses: Sequence[str], references: Sequence[str], tokenize: str = "13a"
) -> dict[str, float]:
    """`{"bleu", "chrf", "exact_match"}` of `hypotheses` against one reference each: the
    corpus BLEU and chrF of sacrebleu (0-100) and the fraction of exact strings (0-1)."""
    if len(hypotheses) != len(references):
        raise ValueError(
            "one reference per hypothesis. Received: "
            f"{len(hypotheses)} hypotheses and {len(references)} references"
        )
    if not hypotheses:
        return {"bleu": 0.0, "chrf": 0.0, "exact_match": 0.0}
    hypotheses, references = list(hypotheses), [list(references)]
    return {
        "bleu": float(BLEU(tokenize=tokenize).corpus_score(hypotheses, references).score),
        "chrf": float(CHRF().corpus_score(hypotheses, references).score),
        "exact_match": sum(h == r for h, r in zip(hypotheses, references[0])) / len(hypotheses),
    }


def signatures(tokenize: str = "13a") -> dict[str, str]:
    """sacrebleu's signature of each score `corpus_scores` computes (a metric tells it once
    it has scored: here one sentence)."""
    metrics = {"bleu": BLEU(tokenize=tokenize), "chrf": CHRF()}
    for metric in metrics.values():
        metric.corpus_score(["a"], [["a"]])
    return {name: str(metric.get_signature()) for name, metric in metrics.items()}

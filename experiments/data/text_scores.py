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

import dataclasses
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


@dataclasses.dataclass
class SplitTexts:
    """A test split as strings: its sources, its references (the targets as written, for a
    task that read them from a file, else as decoded) and each decoding's hypotheses
    (a copied word written as itself, by `vocab`), scored with BLEU tokenisation `tokenize`."""

    split: object
    vocab: object
    sources: list[str]
    references: list[str]
    tokenize: str = "13a"
    hypotheses: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, task, split) -> SplitTexts:
        vocab = task.output_vocab
        if split.texts is not None:
            sources = [source for source, _ in split.texts]
            references = [target for _, target in split.texts]
        else:
            sources = [source_text(task, split, i) for i in range(len(split))]
            references = [
                vocab.decode_extended(split.targets[i], split.words(i)) for i in range(len(split))
            ]
        return cls(split, vocab, sources, references, task.bleu_tokenize)

    def score(self, name: str, decoded) -> dict[str, float]:
        """`{"bleu_NAME", "chrf_NAME"}` of the decodings `decoded` (ids) of the split."""
        words = self.split.words
        self.hypotheses[name] = [
            self.vocab.decode_extended(decoded[i], words(i)) for i in range(len(self.split))
        ]
        scores = corpus_scores(self.hypotheses[name], self.references, self.tokenize)
        return {f"bleu_{name}": scores["bleu"], f"chrf_{name}": scores["chrf"]}

    def copy_baseline(self) -> dict[str, float]:
        """`copy_baseline_chrf`: the sources themselves as the translation, the cheapest
        reference point for a chrF."""
        return {"copy_baseline_chrf": corpus_scores(self.sources, self.references)["chrf"]}

    def files(self) -> dict[str, str]:
        """`text/test_*.txt`, one line a text, so `sacrebleu REFERENCES -i HYPOTHESES` gives
        the logged figures."""
        texts = {"sources": self.sources, "references": self.references}
        texts |= {f"hypotheses_{name}": lines for name, lines in self.hypotheses.items()}
        return {
            f"text/test_{name}.txt": "".join(line.replace("\n", " ") + "\n" for line in lines)
            for name, lines in texts.items()
        }


def source_text(task, split, i: int) -> str:
    """The source of row `i`, its unknown words included where the split knows them."""
    if split.x_ext is None:
        return task.vocab.decode(split.x[i])
    return task.vocab.decode_extended(split.x_ext[i], split.words(i))

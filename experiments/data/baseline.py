"""A linear baseline for classification tasks: TF-IDF over words and word bigrams, then
logistic regression (scikit-learn), trained and tested on the run's own splits.

It sees the tokens the model sees (the task's tokenizer and vocabulary, so a word
outside the vocabulary is `<unk>` for both), and says whether the attention model
earns its keep on the same data.

Its memory does not grow with the number of classes: logistic regression holds a
(rows, classes) matrix of probabilities and (classes, features) weights, several
copies of each while L-BFGS runs, so the baseline fits on at most
`MAX_ROW_CLASSES // classes` training rows (a seeded random subset when there are
more) and the `MAX_WEIGHTS // classes` most frequent features, and predicts that
many rows at a time (with 10,000 classes, unbounded, it took 7.5 GB).
"""

from __future__ import annotations

import numpy as np

from experiments.data import metrics
from experiments.data.split import Split
from experiments.data.vocab import PAD

MAX_ROW_CLASSES = 4_000_000  # rows x classes: 32 MB per float64 matrix
MAX_WEIGHTS = 1_000_000  # classes x features


def documents(split: Split) -> list[str]:
    """Each row's token ids as a space-separated document, padding dropped."""
    return [" ".join(str(int(i)) for i in row if int(i) != PAD) for row in split.x]


def linear_baseline(train: Split, test: Split, num_classes: int, seed: int = 0) -> dict:
    """`accuracy` and `macro_f1` on `test` of TF-IDF (1- and 2-grams, sublinear tf) +
    logistic regression fitted on `train` (within the bounds above)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    rows = max(1, MAX_ROW_CLASSES // num_classes)
    chosen = np.arange(len(train))
    if len(train) > rows:
        chosen = np.sort(np.random.default_rng(seed).choice(len(train), rows, replace=False))
    train = train.take(chosen)  # in memory: also a stored split's rows (`StoredClasses`)
    vectorizer = TfidfVectorizer(
        ngram_range=(1, 2),
        token_pattern=r"\S+",
        sublinear_tf=True,
        max_features=max(1, MAX_WEIGHTS // num_classes),
    )
    features = vectorizer.fit_transform(documents(train))
    if len(np.unique(train.y)) < 2:  # one class seen: it is the answer
        predictions = np.full(len(test), int(train.y[0]))
    else:
        classifier = LogisticRegression(max_iter=2000, random_state=seed)
        classifier.fit(features, train.y)
        blocks = [test.take(slice(start, start + rows)) for start in range(0, len(test), rows)]
        predictions = np.concatenate(
            [classifier.predict(vectorizer.transform(documents(b))) for b in blocks]
        )
    return {
        "accuracy": metrics.accuracy(test.y, predictions),
        "macro_f1": metrics.macro_f1(test.y, predictions, num_classes),
    }

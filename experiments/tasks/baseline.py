"""A linear baseline for classification tasks: TF-IDF over words and word bigrams, then
logistic regression (scikit-learn), trained and tested on the run's own splits.

It sees the tokens the model sees (the task's tokenizer and vocabulary, so a word
outside the vocabulary is `<unk>` for both), and says whether the attention model
earns its keep on the same data.
"""

from __future__ import annotations

import numpy as np

from experiments.tasks import metrics
from experiments.tasks.split import Split
from experiments.tasks.vocab import PAD


def documents(split: Split) -> list[str]:
    """Each row's token ids as a space-separated document, padding dropped."""
    return [" ".join(str(int(i)) for i in row if int(i) != PAD) for row in split.x]


def linear_baseline(train: Split, test: Split, num_classes: int, seed: int = 0) -> dict:
    """`accuracy` and `macro_f1` on `test` of TF-IDF (1- and 2-grams, sublinear tf) +
    logistic regression fitted on `train`."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"\S+", sublinear_tf=True)
    features = vectorizer.fit_transform(documents(train))
    if len(np.unique(train.y)) < 2:  # one class seen: it is the answer
        predictions = np.full(len(test), int(train.y[0]))
    else:
        classifier = LogisticRegression(max_iter=2000, random_state=seed)
        classifier.fit(features, train.y)
        predictions = classifier.predict(vectorizer.transform(documents(test)))
    return {
        "accuracy": metrics.accuracy(test.y, predictions),
        "macro_f1": metrics.macro_f1(test.y, predictions, num_classes),
    }

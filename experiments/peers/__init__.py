"""Peers: the models a Keras user writes without this library, trained by the runner beside
this library's own so that a sweep compares them on the same data, tokenizer and budget."""

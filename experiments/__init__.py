"""Experiment runner for keras-attn-rnn: `python -m experiments`."""

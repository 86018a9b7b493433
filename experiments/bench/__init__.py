"""Benchmarks: the project against its peers side by side (`cases/`), scaling curves
(`scaling`), their timing (`timing`) and profiles (`profiles`), and the suite that runs,
summarises and logs them (`suite`). The `bench` command is `experiments.commands.bench`;
`tfa_peer.py` is a stand-alone script for a separate TF 2.15 + tensorflow-addons interpreter."""

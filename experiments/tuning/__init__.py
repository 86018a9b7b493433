"""Tuning: Optuna studies whose trials are nested runs (`tune`), each trial a run of
`experiments.training` (`trial`), with the search space, the study's settings, storage
and summary, trial pruning and the workers' heartbeat."""

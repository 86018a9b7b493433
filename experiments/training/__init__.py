"""Training: one tracked run (`run`), its callbacks, checkpoints and strategies, sweeps and resume."""

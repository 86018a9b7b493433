"""Tracking: the MLflow store (`store`, `server`), logging for one run (`tracker`), and
surviving a server outage (`resilient`, `transient`, `spool`, `sync`)."""

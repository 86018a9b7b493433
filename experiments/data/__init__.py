"""What the tasks share: splits, vocabularies, the `Task` record, metrics, the linear
baseline, length buckets and the calls that run a built model. No task lives here
(`experiments.tasks` holds one module per task) and nothing here imports a task or a kind."""

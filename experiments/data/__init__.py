"""What the tasks share: the section bases, splits, vocabularies, the `Task` record, random
strings, metrics and text scores, the linear baseline, length buckets and the calls that run
a built model. No task lives here (`experiments.tasks` holds one module per task) and
nothing here imports a task or a kind."""

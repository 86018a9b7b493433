"""What the end of a run logs once only, however often it is interrupted and resumed.

- Test metrics: `Tracker.log_metrics_once` skips a key already logged at
  that step (on the server, or spooled).
- The models: `logged_models` returns the run's `model_uri` and
  `text_model_uri` tags when both name logged models already, so they are
  not logged again. Either way `delete_orphans` deletes the run's logged
  models that no tag names (a `PENDING` one left by an interrupt in the
  middle of logging, or a finished one whose tags were never set), so the run
  ends with exactly one `model` and one `text_model`. When logging them
  fails (a full artifact disk), `delete_orphans` deletes what was logged of
  them: the run has both models or neither, never one beside a failed one.
- Why the run ended: each ending sets the tags of its status
  (`ENDING_TAGS`); `stale_tags` are those an earlier ending of a resumed
  run left that the new ending does not set (a `failure_reason` on a run
  that finished), which are deleted.
"""

from __future__ import annotations

from experiments.tracking.model_logging import model_tags


def logged_models(client, run_id: str, card: dict | None = None) -> dict[str, str] | None:
    """The run's model tags (`model_tags(card)`: those of the model of text card `card`), when
    all name a logged model (`models:/...`); else None.

    When they do, the run's other logged models (a `PENDING` one left by an
    interrupted second upload, say) are deleted first: they are orphans."""
    tags = client.get_run(run_id).data.tags
    found = {key: tags.get(key, "") for key in model_tags(card)}
    if all(uri.startswith("models:/") for uri in found.values()):
        delete_orphans(client, run_id, card)
        return found
    return None


def delete_orphans(client, run_id: str, card: dict | None = None) -> list[str]:
    """Delete the run's logged models that none of its model tags names; return their ids."""
    run = client.get_run(run_id)
    named = {run.data.tags.get(key, "") for key in model_tags(card)}
    models = client.search_logged_models(
        experiment_ids=[run.info.experiment_id], filter_string=f"source_run_id = '{run_id}'"
    )
    deleted = []
    for model in models:
        if f"models:/{model.model_id}" not in named:
            client.delete_logged_model(model.model_id)
            deleted.append(model.model_id)
    return deleted


# The tags that say why a run ended with each status (set by the runner as it ends the run).
ENDING_TAGS = {
    "FINISHED": (),
    "KILLED": ("killed_by", "resume_with"),
    "FAILED": ("failure_reason",),
}


def stale_tags(tags: dict, status: str) -> list[str]:
    """The tags among `tags` that say why the run ended otherwise than with `status`."""
    own = ENDING_TAGS.get(status, ())
    return [key for keys in ENDING_TAGS.values() for key in keys if key in tags and key not in own]

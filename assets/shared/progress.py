"""Dagster adapter for resources/progress.py: the same counts as the terminal, in the run log.

    with step_progress(context, total=len(rows)) as p:
        ...   # LLM calls made through the council count themselves; p.advance(...) for the rest

On a normal exit the step counts as complete (items the calls never named are done too).
"""

from contextlib import contextmanager

from resources.progress import Progress


@contextmanager
def step_progress(context, total: int, step: str | None = None, line_every_s: float = 10.0):
    step = step or context.op_def.name
    progress = Progress(step, total, sinks=(context.log.info,), line_every_s=line_every_s)
    with progress:
        yield progress
        if progress.total > progress.done:
            progress.advance(progress.total - progress.done)

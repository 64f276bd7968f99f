"""Heavy imports without the cyclic garbage collector, then frozen out of its reach (#44).

Importing Dagster and the job cards, Great Expectations, litellm or the trainer's stack creates
hundreds of thousands of long-lived objects (classes, pydantic models, registries). While they load,
the collector's passes walk the growing heap again and again, and afterwards every full collection
walks all of it once more, although none of it will ever be garbage. :func:`heavy_imports` turns
the collector off for the import and then moves everything alive into the permanent generation
(``gc.freeze()``); reference counting still frees what dies later, only cycles among those objects
are no longer looked for.

Measured on this 2-core machine (CPU of one process): `import assets.definitions` + GX 3.75 s →
3.0 s; litellm 4.0 → 2.5 s; the trainer's stack 6.9 → 4.7 s; a small `quandary run` to the
end 10.2 → 8.2 s. The suite starts dozens of such processes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def heavy_imports() -> Iterator[None]:
    """Run the block (imports) with the collector off, then freeze what is alive. Nests: only the
    outermost block turns the collector back on, and only if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
            gc.freeze()

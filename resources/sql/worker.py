"""The sandbox process that runs untrusted SQL for :mod:`resources.sql.pool`.

Why a process: neither engine checks its interrupt flag inside one allocation, and DuckDB's string
functions (``repeat``, ``string_agg`` ...) allocate outside its ``memory_limit``. A worker with an
address-space limit (``RLIMIT_AS``) turns any runaway allocation into an ``OutOfMemory`` error in
the worker, and the parent kills a worker that misses its deadline, so neither memory nor wall time
of the caller depends on what the SQL does.

Protocol: ``resources/sql/protocol.py``.
"""

import os
import sys

from resources.sql.protocol import read_msg, write_msg

DEFAULT_MEMORY_MB = 512


def proc_status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (VmSize, VmRSS, VmHWM), 0 elsewhere."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _limit_memory(extra_bytes: int) -> int:
    """Cap the address space at what the warmed-up worker uses plus ``extra_bytes``."""
    try:
        import resource

        limit = proc_status_bytes("VmSize") + extra_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        return limit
    except (ImportError, OSError, ValueError):  # not Linux: rely on the engines' own limits
        return 0


def main() -> int:
    os.environ["QUANDARY_SQL_WORKER"] = "1"
    from resources.sql import engines
    from resources.sql.results import FailureKind, QueryFailure

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but protocol messages on the pipe
    engines.warm_up()  # import and start both engines before the limit is measured
    limit = _limit_memory(int(os.environ.get("QUANDARY_SQL_MEMORY_MB", DEFAULT_MEMORY_MB)) << 20)
    write_msg(stdout, {"ready": True, "limit": limit, "pid": os.getpid(), "rss": proc_status_bytes("VmRSS")})
    while True:
        req = read_msg(stdin)
        if req is None:
            return 0
        try:
            out = engines.execute_in_process(*req)
        except MemoryError:
            out = QueryFailure(FailureKind.TOO_LARGE, "worker ran out of memory")
        except Exception as exc:  # noqa: BLE001 - the parent must always get an answer
            out = QueryFailure(FailureKind.RUNTIME, f"{type(exc).__name__}: {exc}")
        try:
            write_msg(stdout, out)
        except MemoryError:
            write_msg(stdout, QueryFailure(FailureKind.TOO_LARGE, "result too large"))


if __name__ == "__main__":
    sys.exit(main())

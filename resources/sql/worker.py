"""The sandbox process that runs untrusted SQL for :mod:`resources.sql.pool` and
:class:`resources.sql.session.SandboxSession`.

Why a process: neither engine checks its interrupt flag inside one allocation, and DuckDB's string
functions (``repeat``, ``string_agg`` ...) allocate outside its ``memory_limit``. A worker with an
address-space limit (``RLIMIT_AS``) turns any runaway allocation into an ``OutOfMemory`` error in
the worker, and the parent kills a worker that misses its deadline, so neither memory nor wall time
of the caller depends on what the SQL does.

A session request keeps one locked read-only DuckDB connection open across queries, with
forwarding UDFs registered on it: each UDF call (one DuckDB vector) goes to the parent over the
pipe and waits for its values, so the parent keeps every LLM concern (AI operators) while the SQL
and its memory stay here. The worker ignores Ctrl-C (the parent kills it) and exits when its
parent is gone, even mid-query.

Protocol: ``resources/sql/protocol.py``.
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path

from resources.sql import engines
from resources.sql.protocol import MessageTooLarge, read_msg, write_msg
from resources.sql.results import FailureKind, QueryFailure

DEFAULT_MEMORY_MB = 512


# Slack over a request's byte cap for one message (pickle framing, column names, error text).
MESSAGE_SLACK_BYTES = 1 << 20


def proc_status_bytes(field: str, pid: int | str = "self") -> int:
    """A memory figure of a process (this one by default) from /proc/PID/status (VmSize, VmRSS,
    VmHWM), 0 elsewhere or when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


SESSION_WORKER_ENV = "QUANDARY_SQL_SESSION_WORKER"  # set for a session's worker (it opens a connection)
UDF_WORKER_ENV = "QUANDARY_SQL_UDF_WORKER"  # set for a session's worker that answers UDF calls


def _limit_memory(extra_bytes: int) -> int:
    """Cap the address space at what the warmed-up worker uses plus ``extra_bytes``."""
    try:
        import resource  # lazy: POSIX only

        limit = proc_status_bytes("VmSize") + extra_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        return limit
    except (ImportError, OSError, ValueError):  # not Linux: rely on the engines' own limits
        return 0


def _exit_with_parent(poll_s: float = 0.25) -> None:
    """End this process when its parent is gone (kill -9 mid-query included). Polling the parent's
    pid, not PR_SET_PDEATHSIG: that fires when the parent *thread* that started us exits, and a
    session worker outlives the thread that started it."""
    parent = int(os.environ.get("QUANDARY_SQL_PARENT_PID") or os.getppid())  # set before we started

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


class _Session:
    """The worker's session connection (one at a time) and the round trip of its UDF calls."""

    def __init__(self, stdin, stdout):
        self.stdin, self.stdout = stdin, stdout
        self.key = None
        self.con = None
        self.too_large = ""  # set when a UDF call's inputs were over the byte cap

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
        self.key = self.con = None

    def query(self, req: dict):
        path, threads, udfs = req["session"]
        if self.key != req["session"]:
            self.close()
            import duckdb  # lazy: only after main() points sys.stdout at stderr (see engines.py)

            try:
                self.con = engines.open_duckdb_readonly(Path(path), threads=threads)
                engines.register_forwarding_udfs(self.con, udfs)
            except duckdb.Error as exc:
                self.close()
                return QueryFailure(FailureKind.RUNTIME, f"cannot open database: {exc}")
            self.key = req["session"]
        self.too_large, cap = "", req["max_bytes"]

        def answer(name: str, columns: list) -> list:
            try:
                write_msg(self.stdout, {"callback": name, "args": columns}, limit=cap + MESSAGE_SLACK_BYTES)
            except MessageTooLarge:
                self.too_large = f"the inputs of one {name} call are larger than {cap >> 20} MB"
                raise ValueError(self.too_large) from None
            reply = read_msg(self.stdin)
            if reply is None:  # the parent is gone
                os._exit(1)
            if "error" in reply:
                raise RuntimeError(reply["error"])
            return reply["values"]

        engines.set_udf_answerer(answer)
        try:
            out = engines.run_duckdb_statement(self.con, req["sql"], req["timeout_s"], req["max_rows"], cap)
        finally:
            engines.set_udf_answerer(None)
        if self.too_large and not out.ok:
            out = QueryFailure(FailureKind.TOO_LARGE, self.too_large, out.elapsed_ms)
        return out

    def release(self, path: str) -> None:
        """A fresh connection on ``path`` needs this one closed (DuckDB refuses a second
        configuration for an open file in one process)."""
        if self.key is not None and self.key[0] == path:
            self.close()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills this process
    os.environ["QUANDARY_SQL_WORKER"] = "1"
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but protocol messages on the pipe
    engines.warm_up()  # import and start both engines before the limit is measured
    if os.environ.get(SESSION_WORKER_ENV) == "1":
        # a session registers its forwarding UDFs (arrow vectors): pyarrow is loaded before the
        # limit too. A pool worker runs plain statements and never needs it: 0.1 s of CPU and
        # ~200 MB of address space less per start (#44)
        import pyarrow

        if os.environ.get(UDF_WORKER_ENV) == "1":
            # a session's UDFs build their answers with pyarrow.array, which loads pandas at its
            # first call (pyarrow's pandas check): loaded here, it is part of the start, before the
            # limit, and not of the first AI query's time and memory (0.3 s idle, ~1 s loaded; #39 item 6)
            pyarrow.array([True], type=pyarrow.bool_())

    _exit_with_parent()
    limit = _limit_memory(int(os.environ.get("QUANDARY_SQL_MEMORY_MB", DEFAULT_MEMORY_MB)) << 20)
    write_msg(stdout, {"ready": True, "limit": limit, "pid": os.getpid(), "rss": proc_status_bytes("VmRSS")})
    session = _Session(stdin, stdout)
    while True:
        req = read_msg(stdin)
        if req is None:
            return 0
        cap = None
        try:
            if isinstance(req, dict):
                cap = req["max_bytes"] + MESSAGE_SLACK_BYTES
                out = session.query(req)
            else:
                session.release(req[0])
                out = engines.execute_in_process(*req)
        except MemoryError:
            out = QueryFailure(FailureKind.TOO_LARGE, "worker ran out of memory")
        except Exception as exc:  # noqa: BLE001 - the parent must always get an answer
            out = QueryFailure(FailureKind.RUNTIME, f"{type(exc).__name__}: {exc}")
        try:
            write_msg(stdout, out, limit=cap)
        except (MemoryError, MessageTooLarge):
            write_msg(stdout, QueryFailure(FailureKind.TOO_LARGE, "result too large to send"))


if __name__ == "__main__":
    sys.exit(main())

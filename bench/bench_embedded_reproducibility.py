"""Do two cold starts of the embedded server give the same answers to the same seeded requests?

For each mode (default: 4 slots + prompt-prefix reuse; deterministic: 1 slot, no reuse) start a
fresh server twice, send the same 12 requests (shared schema prefix, per-request seeds, temperature
0.7 like generation) with 4 in flight, and count the answers that differ between the two starts.
Prints one line per mode: differing answers, wall time per start. ``python bench/... deterministic``
runs one mode only. ``--smoke`` (``make test``): the default mode, 2 short requests of 4 tokens.
"""

import concurrent.futures as cf
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx  # noqa: E402

from resources.llm.embedded import EmbeddedServer, EmbeddedServerError, smollm2_gguf_path  # noqa: E402

SCHEMA = (
    "You write questions about a university database. Tables: students(student_id, name, major, "
    "personal_email, institutional_email), courses(course_id, title, credits, department_id), "
    "departments(department_id, name, building), student_courses(student_id, course_id, grade). "
) * 4
TOPICS = ["students", "courses", "departments", "grades", "emails", "credits"]


def requests(n: int = 12, max_tokens: int = 40, schema: str = SCHEMA) -> list[dict]:
    return [
        {
            "model": "smollm2",
            "temperature": 0.7,
            "seed": 100 + i,
            "max_tokens": max_tokens,
            "messages": [
                {"role": "system", "content": schema},
                {"role": "user", "content": f"Write one question about {TOPICS[i % len(TOPICS)]} (#{i})."},
            ],
        }
        for i in range(n)
    ]


def cold_run(deterministic: bool, bodies: list[dict]) -> tuple[list[str], float]:
    t0 = time.monotonic()
    with EmbeddedServer(deterministic=deterministic) as server:

        def ask(body):
            r = httpx.post(
                server.base_url + "/chat/completions", json=body, timeout=3000
            )  # one slot queues requests: long waits under load
            return r.json()["choices"][0]["message"]["content"]

        with cf.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(ask, bodies))
    return answers, time.monotonic() - t0


def main() -> int:
    arg = sys.argv[1] if len(sys.argv) > 1 else ""
    smoke = arg == "--smoke"
    bodies = requests(2, 4, SCHEMA[:200]) if smoke else requests()
    modes = (False,) if smoke else {"default": (False,), "deterministic": (True,)}.get(arg, (False, True))
    if smoke:
        try:
            smollm2_gguf_path()
        except EmbeddedServerError as exc:
            print(f"SKIP: {exc}")
            return 0
    for deterministic in modes:
        (a, ta), (b, tb) = cold_run(deterministic, bodies), cold_run(deterministic, bodies)
        differ = sum(x != y for x, y in zip(a, b))
        slots = EmbeddedServer(deterministic=deterministic).n_parallel  # the test suite serves one
        mode = "deterministic (1 slot, no prefix reuse)" if deterministic else f"default ({slots} slots, prefix reuse)"
        print(
            f"{mode:<42} {differ:>2}/{len(a)} answers differ between two cold starts; {ta:.1f} s / {tb:.1f} s per start"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

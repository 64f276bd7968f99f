"""The embedded SmolLM2 server: real model, real HTTP, schema-valid JSON through the council."""

from typing import Literal

import httpx
import pytest
from pydantic import BaseModel

from resources.llm import get_council
from resources.llm.embedded import EmbeddedServer, get_embedded_server, stop_embedded_server

pytestmark = pytest.mark.e2e


class Verdict(BaseModel):
    answerable: Literal["yes", "no"]
    reason: str


SCHEMA_PREFIX = (
    "You review questions about a university database with tables student(id, name, major), "
    "course(id, title, credits) and enrollment(student_id, course_id, grade). "
)


def test_server_starts_answers_and_stops():
    with EmbeddedServer(n_parallel=2) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        r = httpx.get(server.base_url.removesuffix("/v1") + "/health", timeout=5)
        assert r.status_code == 200
        url = server.base_url
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.removesuffix("/v1") + "/health", timeout=2)


def test_council_gets_schema_valid_json_from_smollm2(quandary_home):
    try:
        council = get_council("validators")
        prompts = [
            [{"role": "system", "content": SCHEMA_PREFIX + "Reply in JSON."}, {"role": "user", "content": q}]
            for q in ("How many students major in physics?", "Which course is the best?")
        ]
        results = council.ask_many(
            "smollm2", prompts, Verdict, tags=[{"stage": "e2e", "candidate_id": str(i)} for i in range(2)]
        )
        assert all(r.ok for r in results), [(r.error, r.raw_text) for r in results]
        assert all(r.parsed.answerable in ("yes", "no") for r in results)
        assert all(r.completion_tokens > 0 and r.cost == 0.0 for r in results)
        # Second time round: served from the call log, no request.
        again = council.ask_many("smollm2", prompts, Verdict)
        assert all(r.cached for r in again)
        outcome = council.vote(
            prompts[0], Verdict, extract=lambda v: v.answerable == "yes", tag={"stage": "e2e-vote", "candidate_id": "0"}
        )
        assert outcome.calls_made + outcome.calls_saved == 3
        assert outcome.decision in (True, False)
        # The second prompt shares its long prefix with the first: llama.cpp reused it.
        assert get_embedded_server().running
    finally:
        stop_embedded_server()

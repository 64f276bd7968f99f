"""CouncilResource: a Dagster asset gets councils from it; nothing starts until a call needs it."""

from typing import Literal

from dagster import asset, materialize
from pydantic import BaseModel

import resources.llm.embedded as embedded
from assets.shared.resources import CouncilResource
from tests.llm_fakes import json_reply

CONFIG = "members:\n  a: {model: scripted/a}\n  b: {model: scripted/b, seed: 1}\n  c: {model: scripted/c, seed: 2}\ncouncils:\n  default: [a, b, c]\n"


class Verdict(BaseModel):
    verdict: Literal["yes", "no"]


def test_resource_serves_councils_to_assets(scripted, tmp_path):
    cfg = tmp_path / "council.yaml"
    cfg.write_text(CONFIG)
    scripted.responder = lambda req: json_reply({"verdict": "yes"})

    @asset
    def judged(council: CouncilResource) -> dict:
        out = council.get_council("validators").vote(
            [{"role": "user", "content": "q"}],
            Verdict,
            extract=lambda v: v.verdict == "yes",
            tag={"stage": "judged", "candidate_id": "c1"},
        )
        return {"decision": out.decision, "saved": out.calls_saved}

    result = materialize([judged], resources={"council": CouncilResource(config_path=str(cfg))})
    assert result.success
    assert result.output_for_node("judged") == {"decision": True, "saved": 1}
    assert scripted.count == 2


def test_default_resource_does_not_start_the_embedded_server(quandary_home):
    embedded.stop_embedded_server()  # an earlier in-process e2e test may have left one running
    res = CouncilResource()
    assert "validators" in res.roles()
    assert res.get_council("validators").member_names[0] == "smollm2"
    assert embedded._singleton is None or not embedded._singleton.running

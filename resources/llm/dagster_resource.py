"""``CouncilResource``: the LLM council as a Dagster resource.

    defs = Definitions(assets=[...], resources={"council": CouncilResource(config_path=None)})

    @asset
    def validated(context, council: CouncilResource, candidates):
        validators = council.get_council("validators")
        outcome = validators.vote(messages, Verdict, extract=lambda v: v.ok, tag=dict(stage="s2", candidate_id=cid))

``config_path`` (or ``$QUANDARY_COUNCIL_CONFIG``) selects the council config; ``None`` = embedded
default. The embedded SmolLM2 server is *not* started when the resource is built: it starts on the
first call that needs it, once per process, and stops at process exit, so runs that hit only the
cache never load the model.
"""

from dagster import ConfigurableResource

from resources.llm.config import CouncilConfig, load_council_config
from resources.llm.council import Council, call_log, get_council


class CouncilResource(ConfigurableResource):
    config_path: str | None = None
    log_path: str | None = None  # default: $QUANDARY_HOME/llm_calls.sqlite

    def council_config(self) -> CouncilConfig:
        return load_council_config(self.config_path)

    def get_council(self, role: str) -> Council:
        return get_council(role, self.config_path, log_path=self.log_path)

    def roles(self) -> list[str]:
        return sorted(self.council_config().councils)

    def call_log_path(self) -> str:
        return str(call_log(self.log_path).path)

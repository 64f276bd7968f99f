"""Every job's card, in one list (#28 item 1): the command line, the plan line and ``quandary
submit`` look jobs up here; a new job adds its card (``assets/<job>/card.py``) to ``CARDS``."""

from assets.abiss.card import CARD as ABISS
from assets.aisql.card import CARD as AISQL
from assets.aisql.card import EVALUATE_CARD as AISQL_EVALUATE
from assets.ambitab.card import CORPUS_CARD as AMBITAB_CORPUS
from assets.ambitab.card import EVAL_CARD as AMBITAB_EVAL
from assets.ambitab.card import TRAIN_CARD as AMBITAB_TRAIN
from assets.benchmark_audit.card import CARD as BENCHMARK_AUDIT
from assets.benchmark_audit.card import COUNCIL_CARD as BENCHMARK_AUDIT_COUNCIL
from assets.databases.card import CARD as SEED_DATABASES
from assets.interaction.card import CARD as INTERACTION
from assets.shared.cards import JobCard

CARDS: tuple[JobCard, ...] = (
    SEED_DATABASES,
    ABISS,
    INTERACTION,
    AMBITAB_CORPUS,
    AMBITAB_EVAL,
    AMBITAB_TRAIN,
    AISQL,
    AISQL_EVALUATE,
    BENCHMARK_AUDIT,
    BENCHMARK_AUDIT_COUNCIL,
)
MAIN = ABISS  # the job `quandary run` and `quandary demo` start without --job


class UnknownJob(LookupError):
    """A job name no card has."""


def job_names() -> list[str]:
    return [c.name for c in CARDS]


def card_for(name: str | None) -> JobCard:
    """The card of job ``name`` (None: the main job); an unknown name raises :class:`UnknownJob`
    with a one-line message listing the jobs."""
    if name is None:
        return MAIN
    for c in CARDS:
        if c.name == name:
            return c
    raise UnknownJob(f"unknown job {name!r}; jobs: {', '.join(job_names())}")

"""#28 item 1: every job is described once, by its card; the command line names no job itself."""

import re
from pathlib import Path

import pytest

from assets.cards import CARDS, MAIN, UnknownJob, card_for
from assets.definitions import MAIN_JOB, defs

ROOT = Path(__file__).resolve().parents[2]


def test_every_dagster_job_has_exactly_one_card_and_every_card_a_job():
    jobs = sorted(j.name for j in defs.jobs)
    cards = sorted(c.name for c in CARDS)
    assert cards == jobs
    for c in CARDS:  # the card holds the job object itself, not a copy of its name
        assert defs.resolve_job_def(c.name).name == c.job.name
    assert MAIN.name == MAIN_JOB


def test_the_card_says_whether_a_job_is_partitioned_by_database():
    from assets.shared.partitions import databases_partitions

    for c in CARDS:
        parts = defs.resolve_job_def(c.name).partitions_def
        assert c.database_partitions == (getattr(parts, "name", None) == databases_partitions.name), c.name


def test_an_unknown_job_is_one_line_listing_the_jobs():
    with pytest.raises(UnknownJob) as err:
        card_for("no_such_job")
    message = str(err.value)
    assert "\n" not in message and "'no_such_job'" in message
    assert all(c.name in message for c in CARDS)
    assert card_for(None) is MAIN


def test_config_builders_refuse_an_unknown_field_and_leave_defaults_out():
    from assets.cards import INTERACTION as interaction

    assert interaction.config() == {}
    built = interaction.config(max_questions=1, max_steps=0, agents=None)
    assert built == {
        "ops": {
            "interaction_subset": {"config": {"max_questions": 1}},
            "interaction_conversations": {"config": {"max_steps": 0}},
        }
    }
    from assets.cards import ABISS, AISQL, AISQL_EVALUATE, AMBITAB_CORPUS, AMBITAB_EVAL, INTERACTION

    for c in (INTERACTION, AMBITAB_CORPUS, AMBITAB_EVAL, AISQL, AISQL_EVALUATE):
        with pytest.raises(ValueError, match="no_such_field"):
            c.config(no_such_field=1)
    with pytest.raises(ValueError, match="no_such_field"):
        ABISS.config(grid={"no_such_field": 1})


JOB_LITERAL = re.compile(r"['\"](" + "|".join(re.escape(c.name) for c in CARDS) + r")['\"]")


def test_no_job_name_is_spelled_out_under_cli():
    hits = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "cli").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if JOB_LITERAL.search(line)
    ]
    assert hits == []

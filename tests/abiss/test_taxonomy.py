import json

import pytest
from pydantic import ValidationError

from cli import main
from pipelines.abiss.taxonomy import (
    DEFAULT_STYLES,
    DIFFICULTIES,
    STYLES,
    SUBCATEGORIES,
    Group,
    output_model_for,
    subcategories_in,
    subcategory,
)


def test_thirteen_subcategories_in_three_groups():
    assert len(SUBCATEGORIES) == 13
    assert len({s.id for s in SUBCATEGORIES}) == 13
    assert [len(subcategories_in(g)) for g in Group] == [2, 7, 4]


@pytest.mark.parametrize("sub", SUBCATEGORIES, ids=lambda s: s.id)
def test_every_subcategory_is_complete_and_examples_fit_its_schema(sub):
    assert sub.definition and len(sub.characteristics) >= 2
    assert len(sub.examples) >= 3
    model = output_model_for(sub.id)
    for example in sub.examples:
        model.model_validate(example)
    fields = set(model.model_fields)
    if sub.group is Group.AMBIGUOUS:
        assert "interpretations" in fields and "feedback" not in fields
    elif sub.group is Group.UNANSWERABLE:
        assert "feedback" in fields and not sub.solvable
    else:
        assert fields <= {"question", "evidence"}


def test_ambiguous_schema_requires_exactly_two_interpretations():
    model = output_model_for("lexical_overlap")
    with pytest.raises(ValidationError):
        model.model_validate({"question": "q", "interpretations": [{"hidden_knowledge": "only one"}]})
    with pytest.raises(ValidationError):
        model.model_validate({"question": "q", "interpretations": [{"hidden_knowledge": "a"}] * 3})


def test_styles_and_difficulties():
    assert [s.id for s in STYLES] == ["formal", "colloquial", "imperative", "interrogative", "descriptive", "concise"]
    assert DEFAULT_STYLES == ("formal", "colloquial", "interrogative")
    assert [d.id for d in DIFFICULTIES] == ["simple", "moderate", "complex", "highly complex"]


def test_unknown_subcategory_names_the_known_ones():
    with pytest.raises(KeyError, match="answerable_with_evidence"):
        subcategory("nope")


def test_cli_taxonomy_json(capsys):
    assert main(["taxonomy", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["subcategories"]) == 13
    assert data["subcategories"][2]["output_schema"]["required"] == ["question", "interpretations"]
    assert len(data["styles"]) == 6 and len(data["difficulties"]) == 4

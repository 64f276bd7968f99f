"""ABISS §4.2: the ten-stage validation cascade (plus our step 0), one module per stage.

:data:`STAGES` is the cascade: an ordered tuple of stage specs, one per module ``sNN_<name>.py``
(the way sqlglot chains its optimizer rules), each with its ``decide`` function; :func:`run_stage`
runs one of them on the survivors of the previous ones. :mod:`.base` holds the spec, the
:class:`StageContext` and the decision records; :mod:`.voting` the two council patterns several
stages share (a yes/no vote; members writing SQL checked by relaxed equivalence).

Each stage sees only the survivors of the previous stages and applies only to the groups the
paper names; other survivors pass through with ``applies = False``. A stage returns one
*decision* per entering candidate: ``passed``, ``reason`` and the council votes behind it
(member, comparison, vote, parsed_ok, llm_call_id).

Vote rules (documented choices where the paper is terse):

* Acceptance votes (stages 3, 4, 8, 10, and the per-comparison votes of 9) use a strict majority
  of the council's members: a tie rejects. A failed call or an answer unreadable after the repair
  call casts *no* vote (recorded as ``failed``), never an abstention: the decision stands only when
  the votes cast fix it whatever the failed members said (the paper asks that "the majority of
  models agree"); else the row is undecided and, unless failures are tolerated, the stage fails.
* SQL-writing stages (5, 6) count a member's SQL as "equivalent" only when it executes and is
  equivalent to the gold under Appendix A's relaxed equivalence; the question (stage 5) or
  interpretation (stage 6) is removed when a strict majority of members is equivalent.
* Stage 7 removes a question as soon as any member writes SQL that executes with a non-empty
  result *and* passes the council's ground-truth check (the paper's "any model").
* Stage 9 stops at the first lost comparison. A/B positions alternate by a hash of the
  candidate and competitor, so position bias cannot favour the assigned category.
* Short-circuit everywhere: members are asked in waves no larger than needed to decide.

Stage 1 treats literal-only differences *within* an ambiguous group as intended (missing user
knowledge and vagueness readings differ only in a value), so masked-SQL duplicates are only
counted across groups.
"""

from __future__ import annotations

from pipelines.abiss.stages.base import AMB, ANS, UNA, StageContext, StageSpec, decision
from pipelines.abiss.stages.s00_wellformedness import STAGE as WELLFORMEDNESS
from pipelines.abiss.stages.s01_duplicates import STAGE as DUPLICATES
from pipelines.abiss.stages.s02_executability import STAGE as EXECUTABILITY
from pipelines.abiss.stages.s03_conformance import STAGE as CONFORMANCE
from pipelines.abiss.stages.s04_ground_truth import STAGE as GROUND_TRUTH
from pipelines.abiss.stages.s05_evidence_necessity import STAGE as EVIDENCE_NECESSITY
from pipelines.abiss.stages.s06_ambiguity import STAGE as AMBIGUITY
from pipelines.abiss.stages.s07_unsolvability import STAGE as UNSOLVABILITY
from pipelines.abiss.stages.s08_feedback import STAGE as FEEDBACK
from pipelines.abiss.stages.s09_consistency import STAGE as CONSISTENCY
from pipelines.abiss.stages.s10_style import STAGE as STYLE
from resources.llm.runtime import run_sync

# The cascade, in order: each stage sees only the survivors of the ones before it.
STAGES: tuple[StageSpec, ...] = (
    WELLFORMEDNESS,
    DUPLICATES,
    EXECUTABILITY,
    CONFORMANCE,
    GROUND_TRUTH,
    EVIDENCE_NECESSITY,
    AMBIGUITY,
    UNSOLVABILITY,
    FEEDBACK,
    CONSISTENCY,
    STYLE,
)
STAGE_BY_NO = {s.no: s for s in STAGES}

__all__ = ["AMB", "ANS", "STAGES", "STAGE_BY_NO", "UNA", "StageContext", "StageSpec", "decision", "run_stage"]


def run_stage(stage_no: int, survivors: list[dict], ctx: StageContext | None) -> list[dict]:
    """Decide every survivor entering ``stage_no``; non-applicable ones pass through. A council stage
    with applicable rows raises :class:`~resources.llm.failures.ProviderUnavailable` when too many of
    its calls failed or were unparseable."""

    stage = STAGE_BY_NO[stage_no]
    applicable = [r for r in survivors if stage.applies(r)]
    passthrough = [decision(r, stage, True, "not applicable", applies=False) for r in survivors if not stage.applies(r)]
    if not stage.uses_council:
        decided = stage.decide(applicable, stage, ctx)
    elif applicable:
        decided = run_sync(stage.decide(applicable, stage, ctx))
        ctx.check_available(stage)
    else:
        decided = []
    return sorted(decided + passthrough, key=lambda d: d["candidate_id"])

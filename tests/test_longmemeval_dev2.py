"""`default` on LongMemEval's second development sample (Wu et al., ICLR 2025; MIT), read
from ../shared/data/longmemeval (never copied): the sample the sittings' rule, chosen on the
first sample and LoCoMo, is confirmed on once (docs/longmemeval.md, "The second sample").

A fixed subset of its 98 questions, by a rule fixed before any figure was read: sorted by
type, then id, and every fourteenth taken from the first (7 questions, one of each type but
two of the first; no abstention question). Judged by the benchmark's evidence turns, never
a pipeline's own output. The figures are those a run of this test printed (a processor with
AVX-512 and VNNI), held to 0.005, as tests/test_longmemeval_dev.py holds the first
sample's: a question whose verdict flipped moves a share by 1/7, so a failure on another
processor is a finding to measure, not noise to widen past.

Cost: the 7 haystacks hold 3,404 distinct turns. Warm (every turn in the embedding
cache) the module took 95 s on two shared cores, 65 s of it the file's comparison and the
rest the renamed import's; cold, MiniLM must first encode those turns, about 80 s more at
the rate docs/longmemeval.md measured (42.8 a second): about 3 minutes in all (an
estimate from that rate; not timed with an empty cache).

The session level is each pipeline's own ranking of sittings (garden/rerank/sittings.py);
as on the first sample, every session is renamed to a random name and `default`'s
figures must not move (`renamed_import`).
"""
from __future__ import annotations

import pytest

from longmemeval_files import SAMPLES, SUBSET_PIPELINES as PIPELINES, renamed_report, subset_fixtures

TOLERANCE = 0.005
subset, report = subset_fixtures(SAMPLES / "longmemeval_s_dev2.json.gz", every=14, folder="lme-dev2")


def test_the_subset_is_the_rules(report):
    assert report["questions"] == 7


def test_the_figures_are_those_measured(report):
    """Every pipeline's session and turn figures, garden's and the authors' (6 questions
    have user-side gold), as measured. Here `default` leads at session level and trails
    `hybrid` at turn level (0.684 against 0.704 nDCG@10; the whole sample: 0.754 against
    0.682), so no lead is asserted at turn level: the subset is the rule's, not chosen."""
    authors = report["longmemeval_scoring"]["session"]["all"]["pipelines"]
    for pipeline in PIPELINES:
        turn, session = report["turn"]["pipelines"][pipeline], report["session"]["pipelines"][pipeline]
        got = {"turn nDCG@10": turn["nDCG@10"], "session nDCG@10": session["nDCG@10"],
               "session Success@5": session["Success@5"],
               **{f"authors' session {m}": authors[pipeline][m]
                  for m in ("recall_all@5", "recall_any@5", "ndcg_any@10")}}
        for name, value in got.items():
            assert value == pytest.approx(EXPECTED[pipeline][name], abs=TOLERANCE), (pipeline, name)


def test_the_packet_is_as_measured(report):
    """On these 7 `default`'s packet covers what `bm25s`'s does, no more (the whole
    sample: 0.691 against 0.608; docs/longmemeval.md)."""
    groups = report["packet"]["groups"]
    default, bm25s = groups["default"]["answerable"], groups["bm25s"]["answerable"]
    assert default["evidence_covered"] == pytest.approx(PACKET["covered"], abs=TOLERANCE)
    assert default["answered"] == pytest.approx(PACKET["answered"], abs=TOLERANCE)
    assert bm25s["evidence_covered"] == pytest.approx(PACKET["covered, bm25s"], abs=TOLERANCE)


def test_renaming_every_session_changes_no_figure_of_default(subset, report, tmp_path_factory):
    """The sittings break ties by the story's order, never a name (the bare retrievers
    break exact ties by id, which renaming may move: docs/longmemeval.md, "No name")."""
    root = tmp_path_factory.mktemp("lme-dev2-renamed")
    names, renamed = renamed_report(subset, root)
    assert any(old.startswith("answer_") for old in names)
    for level in ("turn", "session"):
        got, before = renamed[level]["pipelines"]["default"], report[level]["pipelines"]["default"]
        for measure, value in before.items():
            if isinstance(value, float) and measure != "queries_per_s":   # a speed, not a figure
                assert got[measure] == pytest.approx(value, rel=1e-12, abs=1e-12), (level, measure)


EXPECTED = {
    "bm25s": {"turn nDCG@10": 0.641, "session nDCG@10": 0.857, "session Success@5": 0.857,
              "authors' session recall_all@5": 0.833, "authors' session recall_any@5": 0.833,
              "authors' session ndcg_any@10": 0.833},
    "hybrid": {"turn nDCG@10": 0.704, "session nDCG@10": 0.929, "session Success@5": 1.0,
               "authors' session recall_all@5": 1.0, "authors' session recall_any@5": 1.0,
               "authors' session ndcg_any@10": 0.938},
    "default": {"turn nDCG@10": 0.684, "session nDCG@10": 1.0, "session Success@5": 1.0,
                "authors' session recall_all@5": 1.0, "authors' session recall_any@5": 1.0,
                "authors' session ndcg_any@10": 1.0},
}
PACKET = {"covered": 0.600, "answered": 1.0, "covered, bm25s": 0.600}

"""A LongMemEval run beside the published figures (`garden compare --against published`).

The authors' session measures of each pipeline in the run (garden/evaluation/longmemeval.py,
their rules: gold sessions hold a user turn marked has_answer, abstention left out) are set
beside what other systems published for the same measures, each row saying the questions
and the scoring it rests on. A published figure was measured on other questions (most on
all 500 of LongMemEval S, one on M), often with services the garden does not use: it stands
beside a run's figure in definition, not on the same questions, and the table says so.

The measures are the ones the published systems report at session level: `recall_all@5`
(every gold session in the top five: the official protocol's recall), `recall_any@5` (one
of them) and `ndcg_any@10`. A system that did not publish one shows no figure there.
"""
from __future__ import annotations

from dataclasses import dataclass

MEASURES = ("recall_all@5", "recall_any@5", "ndcg_any@10")
SHORT = {"recall_all@5": "all@5", "recall_any@5": "any@5", "ndcg_any@10": "ndcg@10"}
AGAINST = ("published",)
RUN_SCORING = "authors'"
SCORINGS = {"authors'": "the authors' rules (their gold, corpus and discount), this run's ranking of sittings",
            "official": "the official protocol: the authors' rules, abstention left out",
            "own run": "the system's own run of the authors' measures, as it published them",
            "own, strict": "its own run, recall_all@5 its published run scored strictly (every gold session)"}


@dataclass(frozen=True)
class Published:
    """One published result: who (`system`, short; `setup`, what it ran with), on which
    questions, scored how (a key of SCORINGS), and where it was published."""

    system: str
    setup: str
    questions: str
    scoring: str
    figures: dict[str, float]
    source: str


# Each figure as its system published it, or as its published run scores under the stated
# rule; none was measured here.
PUBLISHED: tuple[Published, ...] = (
    Published("gbrain, APIs", "a paid embedding API and a paid cross-encoder API", "470 of S", "official",
              {"recall_all@5": 0.955}, "its published LongMemEval run"),
    Published("gbrain, embedder", "the paid embedding API alone, RRF of full text and vectors", "470 of S",
              "official", {"recall_all@5": 0.934}, "its published LongMemEval run"),
    Published("MemPalace hybrid", "hybrid v2: MiniLM with keyword, date and assistant-turn boosts", "500 of S",
              "own, strict", {"recall_all@5": 0.887, "recall_any@5": 0.984, "ndcg_any@10": 0.934},
              "benchmarks/HYBRID_MODE.md"),
    Published("MemPalace raw", "MiniLM over sessions of user turns", "500 of S", "own run",
              {"recall_any@5": 0.966, "ndcg_any@10": 0.889}, "benchmarks/HYBRID_MODE.md"),
    Published("agentmemory", "BM25 and MiniLM", "500 of S", "own run",
              {"recall_any@5": 0.952, "ndcg_any@10": 0.879}, "benchmark/LONGMEMEVAL.md"),
    Published("LongMemEval paper", "its best retriever, on the M haystacks", "M", "official",
              {"recall_all@5": 0.732}, "Wu et al., ICLR 2025"),
)


def beside_published(session: dict[str, dict[str, float]], questions: int, source: str) -> list[dict]:
    """The table's rows: each pipeline of the run (`session`: pipeline -> the authors' session
    measures over its `questions` judged questions of `source`), then every published result.
    A row is {"system", "setup", "questions", "scoring", "figures", "source"}; a measure
    missing from a row's figures was not published."""
    if questions < 1:
        raise ValueError("a run beside the published figures needs at least one judged question")
    rows = [{"system": name, "setup": f"this run, {questions} judged questions of {source}",
             "questions": f"{questions} here", "scoring": RUN_SCORING, "figures": {m: values[m] for m in MEASURES},
             "source": "this run"} for name, values in session.items()]
    return rows + [{"system": p.system, "setup": p.setup, "questions": p.questions, "scoring": p.scoring,
                    "figures": dict(p.figures), "source": p.source} for p in PUBLISHED]


def published_table(rows: list[dict]):
    """`beside_published`'s rows as a table of the printed report: short cells, and below it
    what each system ran with and what each scoring means."""
    from rich.table import Table

    legend = [f"{r['system']}: {r['setup']} ({r['source']})" for r in rows if r["source"] != "this run"]
    legend += [f"{name}: {meaning}" for name, meaning in SCORINGS.items()]
    legend += ["all@5, any@5, ndcg@10: " + ", ".join(MEASURES) + "; a figure from other questions stands "
               "beside this run's in definition only"]
    table = Table(title="session level beside the published figures", caption="\n".join(legend),
                  caption_justify="left")
    for head in ("system", "questions", "scoring"):
        table.add_column(head, no_wrap=True)
    for m in MEASURES:
        table.add_column(SHORT[m], justify="right")
    for row in rows:
        cells = [f"{row['figures'][m]:.3f}" if m in row["figures"] else "-" for m in MEASURES]
        table.add_row(row["system"], row["questions"], row["scoring"], *cells)
    return table

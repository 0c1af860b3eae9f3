"""Choose the passage stage's window (`passage_chars`) and threshold (`passage_at`) by
cross-validation over both development benchmarks: LoCoMo's seven conversations and
LongMemEval's development sample.

Every answerable question runs through `default` as served (the decide gate in effect)
once without the stage (`default-passage`) and once per setting of SETTINGS (a window and
the length past which a record rides as its passage); each run gives
the packet's row (garden/evaluation/packets.py: answered, evidence covered, evidence shown,
precision, characters, items) and one figure the packet measures cannot give: whether the
packet's text still shows the answer. A passage counts as its record in every packet
measure, so a narrower window always fits more records and always covers more; what a
window loses is text. The check: a question whose answer (the benchmark's own answer
string, matched case-blind on word boundaries) occurs in the text of one of its evidence
records is judged; it counts 1 when the packet's texts together hold the answer, 0 when
they do not or the packet is silent.

Folds: LoCoMo's conversations, and seven groups of LongMemEval's questions, stratified by
question type (within each type, in the order of their ids, dealt to the groups in turn,
the count running on from one type to the next); fold k holds out the k-th conversation
(in name order) and the k-th group. For each fold, on the pooled training folds of both:

- a setting is eligible when, on each benchmark, it lowers neither the evidence covered
  nor the share of judged questions whose answer the packet shows (against no passages);
- the eligible setting with the largest mean gain in evidence covered over the two
  benchmarks (each benchmark's mean gain counting once) is chosen, ties to the one that
  cuts less (the wider window, then the higher threshold); no passages (no gain) is
  always eligible.

The held-out fold is then packed with the fold's setting; the held-out figures together are
the honest ones, each benchmark's against no passages by the paired randomization test.
The shipped setting is the same rule on every fold together.

    .venv/bin/python experiments/passages.py [--locomo PATH] [--longmemeval PATH] [--out DIR] [--reuse]

LoCoMo: Maharana et al., ACL 2024, CC BY-NC 4.0. LongMemEval: Wu et al., ICLR 2025, MIT.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.harness.benchmarks import arguments  # noqa: E402
from experiments.harness.folds import GROUPS as FOLDS, choose_then_hold_out, deal  # noqa: E402
from experiments.harness.results import write_json  # noqa: E402

# (passage_chars, passage_at) tried, the ones that cut least last: eight settings, no other.
# The window alone (a record longer than the window is cut) was tried first; the
# threshold at twice the window was added after that run showed LongMemEval's user turns,
# where its evidence is, cut to the window.
SETTINGS = tuple((w, t) for w in (300, 450, 600, 900) for t in (w, 2 * w))
OFF = "off"
BENCHMARKS = ("locomo", "longmemeval")
FIGURES = ("answered", "covered", "shown", "precision", "answer", "chars", "items")


def answer_of(about: str) -> str | None:
    """The answer an imported case's `about` names ("...; answer: X"), or None (LoCoMo's
    adversarial questions name only what a careless memory would say)."""
    head, sep, answer = about.partition("; answer: ")
    return answer.strip() if sep and answer.strip() else None


def holds(text: str, answer: str) -> bool:
    """`answer` in `text`, case-blind, on word boundaries where the answer begins or ends
    with a word character, whitespace runs alike."""
    words = r"\s+".join(re.escape(w) for w in answer.strip().rstrip(".").split())
    if not words:
        return False
    left = r"(?<!\w)" if re.match(r"\w", answer.strip()) else ""
    right = r"(?!\w)" if re.search(r"\w$", answer.strip().rstrip(".")) else ""
    return re.search(left + words + right, text, flags=re.IGNORECASE) is not None


def locomo_stores(path: Path):
    """(story, answerable questions, qid -> answer) per conversation."""
    from garden.evaluation.locomo import category_of
    from garden.evaluation.stores import questions_of
    from garden.formats.locomo import build, read_conversations
    from garden.models import Story

    for conv in read_conversations(path):
        imported = build(conv)
        story = Story.model_validate(imported.story)
        questions = [q for q in questions_of(story, list(imported.cases.values()), category_of) if q.evidence]
        answers = {f"{story.story}/{cid}": answer_of(c["about"]) for cid, c in imported.cases.items()}
        yield story.story, story, questions, answers


def longmemeval_stores(path: Path):
    """(fold key, story, answerable questions, qid -> answer) per question, its fold key
    its type (the groups are dealt in `longmemeval_groups`)."""
    from garden.evaluation.longmemeval import conversation_of
    from garden.formats.longmemeval import read_built

    _, built = read_built(path)
    for b in built:
        conv = conversation_of(b)
        questions = [q for q in conv.questions if q.evidence]
        if questions:
            yield b.qtype, conv.story, questions, {q.qid: answer_of(b.case["about"]) for q in questions}


def longmemeval_groups(rows: list[dict]) -> None:
    """Deal LongMemEval's questions to FOLDS groups, stratified by type (module docstring)."""
    mine = [r for r in rows if r["bench"] == "longmemeval"]
    for r, group in deal(mine, key=lambda r: (r["fold"], r["qid"]), groups=FOLDS):
        r["group"] = group


def collect(locomo: Path, longmemeval: Path) -> list[dict]:
    """One row per answerable question: its benchmark, fold, and per setting its figures."""
    from garden.evaluation.packets import packet_row
    from garden.pipelines import make_pipeline
    from garden.rerank.query import QuerySpec
    from garden.rerank.stages import Settings

    with_stage, without = make_pipeline("default"), make_pipeline("default-passage")
    rows = []
    for bench, stores in (("locomo", locomo_stores(locomo)), ("longmemeval", longmemeval_stores(longmemeval))):
        for fold, story, questions, answers in stores:
            for q in questions:
                answer = answers.get(q.qid)
                if answer is not None and not any(holds(story.by_id[e].body, answer) for e in q.evidence):
                    answer = None   # the evidence does not say it in these words: not judged
                row = {"bench": bench, "fold": fold, "qid": q.qid, "category": q.category, "judged": answer is not None,
                       "settings": {}}
                for setting in (OFF, *SETTINGS):
                    if setting == OFF:
                        packet = without.run(QuerySpec(story, q.text, q.as_of)).packet
                    else:
                        packet = with_stage.run(QuerySpec(story, q.text, q.as_of, settings=Settings(
                            passage_chars=setting[0], passage_at=setting[1]))).packet
                    r = packet_row(q, packet, story)
                    answered = r.outcome == "answered"
                    text = "\n".join(item.text for item in packet.items)
                    row["settings"][name(setting)] = {
                        "answered": float(answered), "covered": r.covered if answered else 0.0,
                        "shown": r.shown if answered else 0.0, "precision": r.precision,
                        "answer": float(holds(text, answer)) if answer is not None else None,
                        "chars": r.chars, "items": r.items,
                        "passages": sum(item.passage is not None for item in packet.items),
                        "evidence_passages": sum(item.passage is not None and item.id in q.evidence
                                                 for item in packet.items)}
                rows.append(row)
            if bench == "locomo" or len(rows) % 20 == 0:
                print(f"{bench}: {len(rows)} questions so far", flush=True)
    longmemeval_groups(rows)
    for r in rows:
        if r["bench"] == "locomo":
            r["group"] = sorted({x["fold"] for x in rows if x["bench"] == "locomo"}).index(r["fold"])
    return rows


def name(setting) -> str:
    """A setting's name in the rows: "window/threshold", or "off"."""
    return setting if setting == OFF else f"{setting[0]}/{setting[1]}"


def mean(rows: list[dict], setting: str, figure: str) -> float | None:
    values = [r["settings"][setting][figure] for r in rows]
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def choose(rows: list[dict]) -> str:
    """The setting the rule picks on these rows (module docstring)."""
    best, best_gain = OFF, 0.0
    for setting in map(name, SETTINGS):
        gains, eligible = [], True
        for bench in BENCHMARKS:
            mine = [r for r in rows if r["bench"] == bench]
            for figure in ("covered", "answer"):
                base, got = mean(mine, OFF, figure), mean(mine, setting, figure)
                if base is not None and got is not None and got < base - 1e-12:
                    eligible = False
            gains.append(mean(mine, setting, "covered") - mean(mine, OFF, "covered"))
        gain = float(np.mean(gains))
        if eligible and gain >= best_gain - 1e-12 and gain > 0:
            best, best_gain = setting, gain   # ties to the one that cuts less: SETTINGS ends with it
    return best


def held_out(rows: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """Each row judged under its fold's chosen setting; and fold -> that setting."""
    chosen = dict(choose_then_hold_out(range(FOLDS), lambda train: choose([r for r in rows if r["group"] in train])))
    out = [{**r, "held": r["settings"][chosen[k]]} for k in range(FOLDS) for r in rows if r["group"] == k]
    return out, chosen


def summary(rows: list[dict], pick) -> dict:
    out = {}
    for figure in FIGURES:
        values = [pick(r)[figure] for r in rows]
        values = [v for v in values if v is not None]
        out[figure] = float(np.mean(values)) if values else None
    out["questions"] = len(rows)
    out["judged"] = sum(r["judged"] for r in rows)
    return out


def report(rows: list[dict]) -> dict:
    from garden.evaluation.measures import randomization_p

    result = {"settings": [name(s) for s in SETTINGS], "in_sample": {}, "folds": [], "held_out": {}}
    for bench in BENCHMARKS:
        mine = [r for r in rows if r["bench"] == bench]
        result["in_sample"][bench] = {s: summary(mine, lambda r, s=s: r["settings"][s])
                                      for s in (OFF, *map(name, SETTINGS))}
        for s in map(name, SETTINGS):
            result["in_sample"][bench][s]["passages"] = mean(mine, s, "passages")
            result["in_sample"][bench][s]["evidence_passages"] = mean(mine, s, "evidence_passages")
    judged, chosen = held_out(rows)
    for k in range(FOLDS):
        fold = [r for r in judged if r["group"] == k]
        result["folds"].append({"fold": k, "setting": chosen[k],
                                "conversation": sorted({r["fold"] for r in fold if r["bench"] == "locomo"}),
                                **{bench: {"held": summary([r for r in fold if r["bench"] == bench],
                                                           lambda r: r["held"]),
                                           "off": summary([r for r in fold if r["bench"] == bench],
                                                          lambda r: r["settings"][OFF])}
                                   for bench in BENCHMARKS}})
    for bench in BENCHMARKS:
        mine = [r for r in judged if r["bench"] == bench]
        held = summary(mine, lambda r: r["held"])
        off = summary(mine, lambda r: r["settings"][OFF])
        p = {figure: randomization_p(np.array([r["held"][figure] for r in mine]),
                                     np.array([r["settings"][OFF][figure] for r in mine]))
             for figure in ("covered", "shown", "answered")}
        answered = [r for r in mine if r["held"]["answer"] is not None]
        p["answer"] = randomization_p(np.array([r["held"]["answer"] for r in answered]),
                                      np.array([r["settings"][OFF]["answer"] for r in answered]))
        result["held_out"][bench] = {"held": held, "off": off, "p": p}
    result["shipped"] = choose(rows)
    return result


def print_report(result: dict) -> None:
    def cell(v, digits=3):
        return "" if v is None else f"{v:.{digits}f}"

    for bench in BENCHMARKS:
        table = result["in_sample"][bench]
        any_row = next(iter(table.values()))
        print(f"\n{bench}: {any_row['questions']} answerable questions, {any_row['judged']} with the answer "
              "in an evidence record's words (in sample, every question)")
        print(" setting  answered covered  shown  precision answer  chars  items  passages (evidence)")
        for s, f in table.items():
            print(f"{s:>8}  {cell(f['answered'])}    {cell(f['covered'])}  {cell(f['shown'])}  "
                  f"{cell(f['precision'])}     {cell(f['answer'])}  {f['chars']:6.0f} {f['items']:5.2f}  "
                  f"{cell(f.get('passages'), 2)} ({cell(f.get('evidence_passages'), 3)})")
    print("\nfold  held out (LoCoMo; LongMemEval group)  setting  covered without -> with, answer shown "
          "without -> with: LoCoMo | LongMemEval")
    for f in result["folds"]:
        parts = [f"{cell(f[b]['off']['covered'])} -> {cell(f[b]['held']['covered'])}, "
                 f"{cell(f[b]['off']['answer'])} -> {cell(f[b]['held']['answer'])}" for b in BENCHMARKS]
        print(f"{f['fold']}  {', '.join(f['conversation'])}; group {f['fold']} "
              f"({f['longmemeval']['held']['questions']} questions)  {f['setting']:>8}  {parts[0]} | {parts[1]}")
    for bench in BENCHMARKS:
        h = result["held_out"][bench]
        print(f"\n{bench} held out, pooled: " + ", ".join(
            f"{figure} {cell(h['off'][figure])} -> {cell(h['held'][figure])}"
            + (f" (p {h['p'][figure]:.3f})" if figure in h["p"] else "") for figure in FIGURES))
    print(f"\nshipped (every fold together): {result['shipped']}")


def main(argv=None) -> int:
    args = arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]), ("locomo", "longmemeval"), argv,
                     reuse="refit from the rows a previous run saved")
    args.out = Path(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    saved = args.out / "passages_rows.json"
    if args.reuse:
        rows = json.loads(saved.read_text(encoding="utf-8"))
    else:
        rows = collect(Path(args.locomo), Path(args.longmemeval))
        saved.write_text(json.dumps(rows), encoding="utf-8")
    result = report(rows)
    write_json(args.out / "passages.json", result, indent=1)
    print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

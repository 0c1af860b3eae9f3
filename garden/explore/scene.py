"""The explorer's scene: one query's neighbourhood and what each stage did to it, as data.

Everything here comes from running the pipeline for real: the structured pipeline's
stages run as they always do, and after each one the explorer copies what the query's
context holds (each candidate's score, labels, `why` and rejection), so a step shows what
that stage changed in the garden's own words. The trace the pipeline writes (triage, the
phrase spans tested, the standout decision per lane, the candidates) and the packet are
read as they are. Nothing is scripted per story or per case, nor per stage: how a stage's
step is drawn is what the stage declares (`step`, `shown_with`, `armed`, `traced`:
garden/rerank/context.py, `StageBase`).

A store of a thousand records is not drawn whole: the neighbourhood is the query's
candidates (the packet first, then the baseline's best, then the structured pipeline's
candidates by score), the records they link to, and their people and topics, up to
MAX_NODES; what is left out is counted.
"""
from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from garden.formats.layout import SUITES
from garden.errors import GardenError
from garden.models import DEFAULT_BUDGET, Story
from garden.formats.cases import Expect
from garden.rerank.lanes import standing
from garden.rerank.stages import STAGES, titles

MAX_NODES = 150          # nodes drawn: records, topics, people and the query
RANKED = 10              # candidates listed in a step's ranking
LISTED = 12              # changes listed per kind in a step, the rest counted
BASELINE_DRAWN = 10      # the baseline's best records always drawn
LAYOUT_SEED = 7          # the layout's fixed seed: the same input draws the same page
LAYOUT_ROUNDS = 300
WIDTH, HEIGHT = 1000.0, 700.0


# --- running the pipeline, stage by stage -------------------------------------------


@dataclass
class Snapshot:
    """What one stage left in the query's context."""

    stage: str
    candidates: dict[str, tuple]     # id -> (score, reason, detail, labels, why, door, lane)
    cutoff: float
    used: int
    packed: list[str]


def run_observed(pipeline_name: str, spec):
    """(outcome, what each stage left in the query's context, one snapshot per stage that
    ran). The session stage reruns the pipeline for the session's earlier queries; those
    runs are not observed, only the outer query."""
    from garden.pipelines import make_pipeline
    from garden.rerank.lanes import lane_cutoff

    snaps: list[Snapshot] = []

    def observe(stage, ctx) -> None:
        snaps.append(Snapshot(
            stage.name,
            {c.id: (c.score, c.reason, c.detail, tuple(c.labels), tuple(c.why), c.door, c.lane)
             for c in ctx.candidates.values()},
            lane_cutoff(ctx), ctx.used, [c.id for c in ctx.packed]))

    outcome = make_pipeline(pipeline_name).run(spec, after=observe)
    return outcome, snaps


# --- inputs --------------------------------------------------------------------------


@dataclass
class Inputs:
    story: Story
    story_path: Path
    spec: Any
    case: Any = None                  # LoadedCase
    expect: Expect | None = None
    controls: list = field(default_factory=list)


def find_case(name: str) -> Path:
    """A case file: a path ending in .yaml, or a case id in regression/ or challenge/."""
    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise GardenError(f"case file {path} does not exist")
        return path
    for folder in SUITES:
        path = Path(folder) / f"{name}.yaml"
        if path.is_file():
            return path
    raise GardenError(f"no case named {name[:80]!r}: looked for regression/{name[:80]}.yaml and "
                      f"challenge/{name[:80]}.yaml")


def check_structured(pipeline: str) -> None:
    from garden.pipelines import check_pipeline, split_structured

    check_pipeline(pipeline)
    if split_structured(pipeline) is None:
        raise GardenError(f"--pipeline {pipeline!r}: the explorer steps through the stages of a structured "
                          "pipeline (default, or default-STAGE); a bare retriever goes in --baseline")


def traced_inputs(trace: str, question: str | None, trace_source: str | None) -> Inputs:
    """A traced question, exactly as it was asked (story, as_of, budget, hints, session,
    settings), found by its number, qid or text as every command names it."""
    from garden.evaluation.replay import find_question, replays_from_trace

    if question is None:
        raise GardenError("explore: --trace names the trace; --query N|QID|TEXT names its question")
    path = Path(trace)
    if not path.exists():
        raise GardenError(f"{path}: no such trace file or folder")
    replay = find_question(replays_from_trace(path, trace_source, expectations=False), question, path)
    return Inputs(replay.spec.story, Path(replay.spec.story_path), replay.spec)


def inputs(story: str | None, query: str | None, as_of: dt.date | None, case: str | None,
           trace: str | None = None, question: str | None = None, trace_source: str | None = None) -> Inputs:
    from garden.formats.cases import load_case, spec_for
    from garden.formats.stories import latest_date, load_story, resolve_story_path
    from garden.models import check_query_text
    from garden.rerank.query import QuerySpec

    if trace is not None:
        if story is not None or query is not None or case is not None or as_of is not None:
            raise GardenError("explore: give STORY and QUERY, --case CASE, or --trace TRACE --query N, not two")
        return traced_inputs(trace, question, trace_source)
    if question is not None or trace_source is not None:
        raise GardenError("explore: --query and --source name a question of --trace TRACE")
    if case is not None:
        if story is not None or query is not None:
            raise GardenError("explore: give either STORY and QUERY or --case CASE, not both")
        if as_of is not None:
            raise GardenError("explore: --as-of is the case's own with --case")
        loaded = load_case(find_case(case))
        main, *controls = loaded.queries
        loaded_story = load_story(main.story_path)
        return Inputs(loaded_story, main.story_path, spec_for(main, loaded_story), loaded, main.expect, controls)
    if story is None or query is None:
        raise GardenError("explore: give STORY and QUERY, or --case CASE")
    try:
        check_query_text(query)
    except ValueError as exc:
        raise GardenError(f"query text: {exc}") from None
    path = resolve_story_path(story, Path.cwd())
    loaded_story = load_story(path)
    spec = QuerySpec(loaded_story, query, as_of or latest_date(loaded_story), DEFAULT_BUDGET, story_path=str(path))
    return Inputs(loaded_story, path, spec)


# --- the scene -----------------------------------------------------------------------


def build_scene(story: str | None = None, query: str | None = None, *, as_of: dt.date | None = None,
                pipeline: str = "default", baseline: str = "bm25s", case: str | None = None,
                max_nodes: int = MAX_NODES, trace: str | None = None, question: str | None = None,
                trace_source: str | None = None) -> dict:
    """The explorer's data for one query (or a case's query and its controls, or a traced
    question: `trace` and `question`, its number, qid or text)."""
    from garden.pipelines import check_pipeline, make_pipeline

    check_structured(pipeline)
    check_pipeline(baseline)
    got = inputs(story, query, as_of, case, trace, question, trace_source)
    spec, st = got.spec, got.story
    outcome, snaps = run_observed(pipeline, spec)
    base = make_pipeline(baseline).run(spec)
    trace, packet = outcome.stages, outcome.packet
    base_ranking = baseline_ranking(base)

    marks = expectation_marks(got.expect) if got.expect is not None else {}
    failures = None
    if got.expect is not None:
        from garden.formats.cases import check

        failures = check(got.expect, packet, st, spec.include_private)

    drawn, left_out = neighbourhood(st, packet, snaps, base_ranking, marks, trace, max_nodes)
    nodes, edges = graph(st, drawn, trace)
    layout(nodes, edges, drawn)

    steps = build_steps(st, spec, trace, packet, snaps, base_ranking, base.packet, baseline, pipeline, drawn)
    if got.controls:
        steps.insert(len(steps) - 1, controls_step(got, pipeline))

    scene = {
        "title": st.title or st.story,
        "story": st.story,
        "query": spec.query,
        "as_of": spec.as_of.isoformat(),
        "budget": spec.budget,
        "pipeline": pipeline,
        "baseline": baseline,
        "case": got.case.id if got.case is not None else None,
        "case_about": (got.case.case.about or "").strip() if got.case is not None else None,
        "case_passed": None if failures is None else not failures,
        "case_failures": failures,
        "marks": marks,
        "store": {"records": len(st.records), "topics": len(st.topics), "people": len(st.entities)},
        "drawn": {"records": sum(n["type"] == "record" for n in nodes),
                  "topics": sum(n["type"] == "topic" for n in nodes),
                  "people": sum(n["type"] == "person" for n in nodes)},
        "left_out": left_out,
        "width": WIDTH, "height": HEIGHT,
        "nodes": nodes,
        "edges": edges,
        "steps": steps,
    }
    return scene


def baseline_ranking(outcome) -> list[dict]:
    """The baseline's candidates in its own order, each with its score: the packed score
    where it was packed, else its one member's score, else the sum of its members'."""
    packed = {item.id: item.score for item in outcome.packet.items}
    out = []
    for c in outcome.stages.get("candidates", []):
        scores = c.get("scores", {})
        score = c.get("score", packed.get(c["id"]))
        if score is None:
            score = sum(scores.values())
        out.append({"id": c["id"], "score": round(float(score), 6),
                    "scores": {k: round(float(v), 6) for k, v in sorted(scores.items())}})
    return out


def expectation_marks(expect: Expect) -> dict[str, list[str]]:
    """Record id -> what the case's expectations say of it (required or forbidden)."""
    marks: dict[str, list[str]] = {}

    def add(rid: str, text: str) -> None:
        marks.setdefault(rid, [])
        if text not in marks[rid]:
            marks[rid].append(text)

    if expect.lead:
        add(expect.lead, "required: leads the packet")
    for rid in expect.include:
        add(rid, "required: in the packet")
    for n, rid in enumerate(expect.sequence, 1):
        add(rid, f"required: position {n} of the sequence")
    for a, b in expect.before:
        add(a, f"required: ahead of {b}")
        add(b, f"required: behind {a}")
    for rid, labels in expect.labels.items():
        add(rid, f"required: labels {', '.join(labels)}")
    for rid, fid in expect.fidelity.items():
        add(rid, f"required: fidelity {fid}")
    for rid, words in expect.shows.items():
        add(rid, "required: its text in the packet shows " + ", ".join(repr(w) for w in words))
    for rid in expect.exclude:
        add(rid, "forbidden: in the packet")
    for rid, labels in expect.absent_labels.items():
        add(rid, f"forbidden: labels {', '.join(labels)}")
    for rid, reason in expect.rejected.items():
        add(rid, f"required: rejected as {reason}")
    return dict(sorted(marks.items()))


# --- the neighbourhood ---------------------------------------------------------------


def neighbourhood(st: Story, packet, snaps: list[Snapshot], base_ranking: list[dict], marks: dict,
                  trace: dict, max_nodes: int) -> tuple[list[str], dict]:
    """The record ids to draw, in order of importance, and counts of what was left out."""
    by_id = st.by_id
    final = snaps[-1].candidates if snaps else {}
    ranked = sorted(final, key=lambda rid: (final[rid][1] is not None, -final[rid][0], rid))
    wanted: list[str] = []
    wanted += [item.id for item in packet.items]
    wanted += [rid for rid in marks if rid in by_id]
    wanted += [c["id"] for c in base_ranking[:BASELINE_DRAWN]]
    wanted += ranked
    wanted += [c["id"] for c in base_ranking[BASELINE_DRAWN:]]
    seen: set[str] = set()
    core = [rid for rid in wanted if rid in by_id and not (rid in seen or seen.add(rid))]
    cited_by: dict[str, list[str]] = {}
    for r in st.records:
        for sid in r.sources:
            cited_by.setdefault(sid, []).append(r.id)
    linked: list[str] = []
    for rid in core:
        r = by_id[rid]
        for other in [*r.sources, *r.related, *([r.superseded_by] if r.superseded_by else []),
                      *sorted(cited_by.get(rid, []))]:
            if other in by_id and other not in seen:
                seen.add(other)
                linked.append(other)
    pool = core + linked
    resolution = trace.get("resolution", {})
    extra = {"topics": set(resolution.get("topics", {})), "entities": set(resolution.get("entities", {}))}
    budget = max_nodes - 1 - len(extra["topics"]) - len(extra["entities"])  # the query node and its anchors
    drawn: list[str] = []
    topics, people = set(extra["topics"]), set(extra["entities"])
    for rid in pool:
        r = by_id[rid]
        new_t = {t for t in r.topics if t not in topics}
        new_p = {e for e in [*r.entities, *([r.speaker] if r.speaker else [])] if e not in people}
        cost = 1 + len(new_t) + len(new_p)
        if cost > budget:
            continue
        budget -= cost
        drawn.append(rid)
        topics |= new_t
        people |= new_p
    drawn_set = set(drawn)
    left = {"records": len(st.records) - len(drawn),
            "candidates": sum(1 for rid in core if rid not in drawn_set),
            "linked": sum(1 for rid in linked if rid not in drawn_set),
            "candidates_total": len(core), "linked_total": len(linked)}
    return drawn, left


def graph(st: Story, drawn: list[str], trace: dict) -> tuple[list[dict], list[dict]]:
    """Nodes (the query, records, topics, people) and edges among the drawn ones."""
    by_id = st.by_id
    resolution = trace.get("resolution", {})
    nodes: list[dict] = [{"id": "query", "type": "query", "label": "query"}]
    topic_ids: list[str] = []
    people_ids: list[str] = []
    for t in resolution.get("topics", {}):
        topic_ids.append(t)
    for e in resolution.get("entities", {}):
        people_ids.append(e)
    for rid in drawn:
        r = by_id[rid]
        topic_ids += r.topics
        people_ids += [*r.entities, *([r.speaker] if r.speaker else [])]
    topic_ids = list(dict.fromkeys(t for t in topic_ids if t in st.topics))
    people_ids = list(dict.fromkeys(e for e in people_ids if e in st.entities))
    for t in topic_ids:
        topic = st.topics.get(t)
        nodes.append({"id": f"topic:{t}", "type": "topic", "label": (topic.title if topic and topic.title else t)})
    for e in people_ids:
        ent = st.entities.get(e)
        nodes.append({"id": f"person:{e}", "type": "person", "label": (ent.name if ent and ent.name else e)})
    for rid in drawn:
        r = by_id[rid]
        nodes.append({"id": rid, "type": "record", "kind": r.kind, "label": rid,
                      "title": r.title or "", "text": _cut(r.body, 400), "at": r.at.isoformat() if r.at else None,
                      "size": len(r.body)})
    present = {n["id"] for n in nodes}
    edges: list[dict] = []

    def edge(a: str, b: str, kind: str) -> None:
        if a in present and b in present and a != b:
            edges.append({"from": a, "to": b, "kind": kind})

    for t, w in resolution.get("topics", {}).items():
        edge("query", f"topic:{t}", "resolves")
    for e in resolution.get("entities", {}):
        edge("query", f"person:{e}", "resolves")
    for t in topic_ids:
        topic = st.topics.get(t)
        for other in (topic.related if topic else []):
            edge(f"topic:{t}", f"topic:{other}", "related")
    for rid in drawn:
        r = by_id[rid]
        for t in r.topics:
            edge(rid, f"topic:{t}", "topic")
        for e in r.entities:
            edge(rid, f"person:{e}", "mentions")
        if r.speaker:
            edge(rid, f"person:{r.speaker}", "speaker")
        for sid in r.sources:
            edge(rid, sid, "source")
        for other in r.related:
            edge(rid, other, "related")
        if r.superseded_by:
            edge(rid, r.superseded_by, "superseded_by")
    return nodes, edges


def layout(nodes: list[dict], edges: list[dict], anchored: list[str] = ()) -> None:
    """A small force-directed layout (Fruchterman and Reingold 1991), seeded, so the same
    input gives the same positions; written into each node as x, y. The query sits in the
    centre; its candidates (`anchored`) are held to it by a weak spring that is not drawn."""
    rng = random.Random(LAYOUT_SEED)
    n = len(nodes)
    index = {node["id"]: i for i, node in enumerate(nodes)}
    cx, cy = WIDTH / 2, HEIGHT / 2
    pos = [[cx + rng.uniform(-0.4, 0.4) * WIDTH, cy + rng.uniform(-0.4, 0.4) * HEIGHT] for _ in nodes]
    if n:
        pos[0] = [cx, cy]
    k = math.sqrt(WIDTH * HEIGHT / max(n, 1)) * 0.55
    springs = [(index[e["from"]], index[e["to"]], 1.0) for e in edges]
    springs += [(0, index[rid], 0.15) for rid in anchored if rid in index]
    temperature = WIDTH / 10
    for _ in range(LAYOUT_ROUNDS):
        disp = [[0.0, 0.0] for _ in nodes]
        for i in range(n):
            xi, yi = pos[i]
            for j in range(i + 1, n):
                dx, dy = xi - pos[j][0], yi - pos[j][1]
                d2 = dx * dx + dy * dy or 1e-4
                f = k * k / d2
                disp[i][0] += dx * f
                disp[i][1] += dy * f
                disp[j][0] -= dx * f
                disp[j][1] -= dy * f
        for a, b, w in springs:
            dx, dy = pos[a][0] - pos[b][0], pos[a][1] - pos[b][1]
            d = math.sqrt(dx * dx + dy * dy) or 1e-2
            f = w * d / k
            disp[a][0] -= dx * f
            disp[a][1] -= dy * f
            disp[b][0] += dx * f
            disp[b][1] += dy * f
        for i in range(1 if n else 0, n):  # the query stays in the centre; gravity keeps the rest near it
            dx = disp[i][0] + (cx - pos[i][0]) * 0.12
            dy = disp[i][1] + (cy - pos[i][1]) * 0.12 * WIDTH / HEIGHT
            d = math.sqrt(dx * dx + dy * dy) or 1e-9
            move = min(d, temperature)
            pos[i][0] = min(WIDTH - 40, max(20, pos[i][0] + dx / d * move))
            pos[i][1] = min(HEIGHT - 20, max(20, pos[i][1] + dy / d * move))
        temperature = max(0.5, temperature * 0.98)
    for node, (x, y) in zip(nodes, pos):
        node["x"], node["y"] = round(x, 1), round(y, 1)


# --- the steps -----------------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _r(x: float) -> float:
    return round(float(x), 4)


def _state(snap: Snapshot | None, drawn: list[str], packed: set[str] | None = None) -> dict:
    """Each drawn record's state at a step: [score or null, status]."""
    out = {}
    cands = snap.candidates if snap else {}
    for rid in drawn:
        c = cands.get(rid)
        if c is None:
            continue
        status = "packed" if packed and rid in packed else ("rejected" if c[1] else "live")
        out[rid] = [_r(c[0]), status if c[1] is None else f"rejected:{c[1]}"]
    return out


def _ranking(snap: Snapshot) -> list[dict]:
    live = [(rid, c) for rid, c in snap.candidates.items() if c[1] is None]
    live.sort(key=lambda x: (-x[1][0], x[0]))
    return [{"id": rid, "score": _r(c[0]), "labels": list(c[3])} for rid, c in live[:RANKED]]


def _diff(before: Snapshot | None, after: Snapshot) -> list[dict]:
    """What a stage changed, each change in the garden's words: a candidate that entered
    (its door), a score that moved (with the `why` it added), a label it earned, a rejection."""
    changes: list[dict] = []
    prev = before.candidates if before else {}
    for rid in sorted(after.candidates, key=lambda x: (-after.candidates[x][0], x)):
        score, reason, detail, labels, why, door, lane = after.candidates[rid]
        old = prev.get(rid)
        new_why = [w for w in why if old is None or w not in old[4]]
        if old is None:
            changes.append({"id": rid, "kind": "entered", "text": f"entered through the {door or 'retriever'}"
                            + (f", score {score:.4f}" if reason is None else ""), "why": new_why})
        elif abs(score - old[0]) > 1e-12:
            changes.append({"id": rid, "kind": "score", "text": f"{old[0]:.4f} → {score:.4f}", "why": new_why})
        for label in labels:
            if old is None or label not in old[3]:
                changes.append({"id": rid, "kind": "label", "text": label, "why": []})
        if reason is not None and (old is None or old[1] is None):
            changes.append({"id": rid, "kind": "rejected", "text": reason, "why": [detail] if detail else []})
        elif reason is None and old is not None and old[1] is not None:
            changes.append({"id": rid, "kind": "restored", "text": f"no longer rejected ({old[1]})", "why": []})
    return changes


def _listed(changes: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """At most LISTED changes of each kind; how many of each kind were left unlisted."""
    counts: Counter = Counter()
    kept = []
    for c in changes:
        counts[c["kind"]] += 1
        if counts[c["kind"]] <= LISTED:
            kept.append(c)
    return kept, {k: v - LISTED for k, v in sorted(counts.items()) if v > LISTED}


STAGE_TITLES = titles()  # each stage's declared title (garden/rerank/stages.py)
DECLARED = {s.name: s for s in STAGES}


def _kind(name: str) -> str:
    """The kind of step the stage `name` is drawn as (`StageBase.step`)."""
    return DECLARED[name].step if name in DECLARED else "changes"


def _drawn_as(kind: str):
    """The stage drawn as a `kind` step (the one whose step opens the page, the one that
    tests spans, ...), whether or not the pipeline runs it."""
    return next(s for s in STAGES if s.step == kind)


def build_steps(st: Story, spec, trace: dict, packet, snaps: list[Snapshot], base_ranking: list[dict],
                base_packet, baseline: str, pipeline: str, drawn: list[str]) -> list[dict]:
    steps: list[dict] = []
    by_snap = {s.stage: s for s in snaps}
    resolution = trace.get("resolution", {})
    decider = _drawn_as("decision")
    tri = trace.get(decider.traced)
    summary = []
    if tri:
        summary.append(f"Decision: {tri['decision'].upper()}. {tri['reason']}")
        if tri.get("fallback"):
            summary.append(f"No {decider.name} rule decided: retrieval is a fallback.")
    else:
        summary.append(f"No {decider.name} stage in {pipeline}: every query retrieves.")
    anchors = []
    if resolution.get("topics"):
        anchors.append("topics " + ", ".join(f"{t} ({w:g})" for t, w in resolution["topics"].items()))
    if resolution.get("entities"):
        anchors.append("people " + ", ".join(resolution["entities"]))
    if resolution.get("explicit_ids"):
        anchors.append("records named by id " + ", ".join(resolution["explicit_ids"]))
    if resolution.get("projects"):
        anchors.append("scoped to " + ", ".join(resolution["projects"]))
    summary.append("The query resolved " + ("; ".join(anchors) if anchors else "no topic, person or record id") + ".")
    for w in packet.warnings:
        summary.append(f"Warning: {w}")
    steps.append({"id": decider.name, "stage": decider.name, "title": decider.title,
                  "summary": summary, "decision": tri["decision"] if tri else "retrieve",
                  "focus": ["query", *[f"topic:{t}" for t in resolution.get("topics", {})],
                            *[f"person:{e}" for e in resolution.get("entities", {})]],
                  "state": {}, "ranking": [], "changes": [], "unlisted": {}})

    base_state = {}
    drawn_set = set(drawn)
    base_packed = set(base_packet.ids())
    for c in base_ranking:
        if c["id"] in drawn_set:
            base_state[c["id"]] = [c["score"], "packed" if c["id"] in base_packed else "live"]
    lead = base_ranking[0]["id"] if base_ranking else None
    bsum = [f"{baseline} ranks by its own score alone, then packs in score order: "
            f"{len(base_ranking)} records score above zero, {len(base_packed)} packed, "
            f"{base_packet.budget.used} of {base_packet.budget.limit} characters."]
    if lead:
        bsum.append(f"It puts {lead} first ({base_ranking[0]['score']:.4f}).")
    steps.append({"id": "baseline", "stage": "baseline", "title": f"Baseline: {baseline}, tokens alone",
                  "summary": bsum, "state": base_state, "focus": [c["id"] for c in base_ranking[:3]],
                  "ranking": [{"id": c["id"], "score": c["score"],
                               "labels": ["packed"] if c["id"] in base_packed else []} for c in base_ranking[:RANKED]],
                  "changes": [], "unlisted": {}, "budget": _budget(st, base_packet.ids(), base_packet.budget)})

    if packet.decision != "retrieve":
        steps.append(packet_step(st, packet, trace, snaps, drawn))
        return steps

    previous = by_snap.get(decider.name)
    pending: list[Snapshot] = []
    for snap in snaps:
        if _kind(snap.stage) == "decision":
            continue
        host = DECLARED[snap.stage].shown_with if snap.stage in DECLARED else None
        if host is not None and host in by_snap:
            pending.append(snap)
            continue
        step = stage_step(st, spec, trace, snap, previous, pending, drawn, pipeline)
        steps.append(step)
        previous, pending = snap, []
    steps.append(packet_step(st, packet, trace, snaps, drawn))
    return steps


def _said_of_folded(trace: dict, folded: list[Snapshot]) -> list[str]:
    """What a step says of each stage drawn within it (`shown_with`), in stage order: the
    ratio a cutoff stage armed, the verdict's support, or the stage's declared `armed`."""
    said = []
    for snap in folded:
        stage = DECLARED[snap.stage]
        if stage.step == "cutoff":
            said.append(f"The {stage.name} stage armed the ratio at {snap.cutoff:g}.")
        elif stage.step == "verdict":
            decided = trace.get(stage.traced)
            if decided:
                said.append(f"The {stage.name} stage: the query's support is {decided['support']:.3f} (top "
                            f"{decided['top']:.3f}, held {decided['held']:.2f}, known {decided['known']:.2f}, "
                            f"second {decided['second']:.3f}), "
                            + ("at or above" if decided["answers"] else "below")
                            + f" this store's threshold {decided['threshold']:.3f} (its level "
                            f"{decided['level']:.3f}, answer_at {decided['answer_at']:g})"
                            f"{standing(decided['standing'])}: "
                            + ("the store holds an answer." if decided["answers"]
                               else f"silent, unless a lane's ratio reaches {decided['decisive']:g}."))
        elif stage.armed:
            said.append(f"The {stage.name} stage armed: {stage.armed}")
    return said


def _lanes_said(trace: dict, name: str, folded: list[Snapshot], pipeline: str) -> tuple[list[str], list[dict]]:
    """A lanes step's summary (what the stages drawn within it armed, then each lane) and its lanes."""
    summary = []
    if not any(_kind(s.stage) == "cutoff" for s in folded):
        summary.append(f"No {_drawn_as('cutoff').name} stage in {pipeline}: the ratio is off, the cap and the share "
                       "rule stay.")
    summary += _said_of_folded(trace, folded)
    lanes = []
    verdict_by = _drawn_as("verdict").name   # a lane's trace says `decided_by` that stage, or the ratio
    for lane in trace.get(DECLARED[name].traced, []):
        ratio = "unbounded" if lane.get("ratio_infinite") else lane.get("ratio")
        lanes.append({"lane": lane["lane"], "ratio": ratio, "standout": lane["standout"],
                      "best": lane.get("best"), "rival": lane.get("rival"), "answers": lane["answers"],
                      "riding": lane["riding"], "active": lane["active"]})
        best = "nothing" if lane.get("best") is None else f"{lane['best']:.4f}"
        by_ratio = lane.get("decided_by", "ratio") != verdict_by
        verdict = (f"{'≥' if lane['answers'] else '<'} standout {lane['standout']:g}" if by_ratio
                   else ("answers" if lane["answers"] else "silent") + f" by the {verdict_by} stage")
        summary.append(f"{lane['lane']} lane: best {best}, rival {lane['rival']:.4f}, ratio {ratio} {verdict}: "
                       + (f"{len(lane['riding'])} ride ({', '.join(lane['riding'])})" if lane["riding"]
                          else "nothing rides"))
    return summary, lanes


# the kinds of step that give their own account, said even when the stage changed no candidate
SELF_EXPLAINED = ("lanes", "budget", "spans")


def stage_step(st: Story, spec, trace: dict, snap: Snapshot, previous: Snapshot | None, folded: list[Snapshot],
               drawn: list[str], pipeline: str) -> dict:
    changes, unlisted = _listed(_diff(previous, snap))
    name = snap.stage
    kind = _kind(name)
    summary: list[str] = []
    extra: dict[str, Any] = {}
    live = sum(1 for c in snap.candidates.values() if c[1] is None)
    rejected = Counter(c[1] for c in snap.candidates.values() if c[1] is not None)
    if kind == "entry":
        summary.append(f"{len(snap.candidates)} candidates entered, {live} live"
                       + (": rejected by the eligibility check "
                          + ", ".join(f"{n} {r}" for r, n in sorted(rejected.items())) if rejected else "") + ".")
    elif kind == "spans":
        ph = trace.get(DECLARED[name].traced, {})
        spans = ph.get("tested", [])
        summary.append(f"{ph.get('tested_total', 0)} spans of two or more words tested, "
                       f"{ph.get('credited', 0)} credited"
                       + (f", {ph.get('omitted', 0)} refused ones not listed" if ph.get("omitted") else "") + ".")
        if not spans:
            summary.append("No span tested: the query holds no two adjacent words in one run.")
        extra["spans"] = [{"span": s["span"], "records": s["records"], "credited": s["credited"],
                           "refused": s["refused"]} for s in spans]
    elif kind == "lanes":
        said, extra["lanes"] = _lanes_said(trace, name, folded, pipeline)
        summary += said
    elif kind == "budget":
        extra["budget"] = _budget(st, snap.packed, None, spec.budget, snap.used)
        summary.append(f"{len(snap.packed)} packed, {snap.used} of {spec.budget} characters used.")
        summary += _said_of_folded(trace, folded)
    if not changes and kind not in SELF_EXPLAINED:
        summary.append("This stage changed nothing for this query.")
    elif changes and kind != "entry":
        kinds = Counter(c["kind"] for c in _diff(previous, snap))
        summary.append("Changes: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ".")
    ranking = _ranking(snap)
    return {"id": name, "stage": name, "title": STAGE_TITLES.get(name, name), "summary": summary,
            "state": _state(snap, drawn, set(snap.packed)), "ranking": ranking,
            "focus": [r["id"] for r in ranking[:1]], "changes": changes, "unlisted": unlisted, **extra}


def _budget(st: Story, ids: list[str], budget=None, limit: int | None = None, used: int | None = None) -> dict:
    if budget is not None:
        limit, used = budget.limit, budget.used
    return {"limit": limit, "used": used,
            "items": [{"id": rid, "chars": len(st.by_id[rid].body)} for rid in ids]}


def packet_step(st: Story, packet, trace: dict, snaps: list[Snapshot], drawn: list[str]) -> dict:
    summary = [f"Decision: {packet.decision.upper()}. {packet.reason}"]
    if packet.decision == "retrieve":
        summary.append(f"{len(packet.items)} items, {packet.budget.used} of {packet.budget.limit} characters.")
        reasons = Counter(r.reason for r in packet.rejected)
        if reasons:
            summary.append("Not packed: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) + ".")
    for w in packet.warnings:
        summary.append(f"Warning: {w}")
    packed = set(packet.ids())
    state = {}
    final = {c["id"]: c for c in trace.get("candidates", [])}
    rejected = {r.id: r.reason for r in packet.rejected}
    drawn_set = set(drawn)
    for rid in drawn:
        if rid in packed:
            item = next(i for i in packet.items if i.id == rid)
            state[rid] = [_r(item.score), "packed"]
        elif rid in rejected and rid in drawn_set:
            score = final.get(rid, {}).get("score")
            state[rid] = [None if score is None else _r(score), f"rejected:{rejected[rid]}"]
    items = [{"id": i.id, "kind": i.kind, "score": i.score, "labels": i.labels, "why": i.why,
              "chars": len(i.text), "text": _cut(i.text, 300)} for i in packet.items]
    shown_rejected = [{"id": r.id, "reason": r.reason, "detail": r.detail}
                      for r in sorted(packet.rejected, key=lambda r: (r.reason == "rank_cut", r.id))][:LISTED * 2]
    return {"id": "packet", "stage": "packet", "title": "The packet", "summary": summary, "state": state,
            "ranking": [], "focus": [i.id for i in packet.items[:1]], "changes": [], "unlisted": {},
            "items": items, "rejected": shown_rejected, "rejected_total": len(packet.rejected),
            "budget": _budget(st, packet.ids(), packet.budget)}


def controls_step(got: Inputs, pipeline: str) -> dict:
    """Each control of the case run for real: its decision, the phrase spans it tested and
    why each was refused, its packet's first items, and whether its expectations held."""
    from garden.formats.cases import check, spec_for
    from garden.formats.stories import load_story
    from garden.pipelines import make_pipeline

    from garden.errors import StoryError
    from garden.formats.cases import check_build_error

    decider, spanner = _drawn_as("decision"), _drawn_as("spans")
    rows = []
    for q in got.controls:
        try:
            st = got.story if q.story_path == got.story_path else load_story(q.story_path)
        except StoryError as exc:  # a control may expect its story to fail the build
            failures = check_build_error(q.expect, exc, q.story_path)
            rows.append({"name": q.name, "query": q.spec_fields["query"], "decision": "build_error",
                         "reason": exc.messages[0], "passed": not failures, "failures": failures,
                         "refusals": [{"rule": "build_error", "text": exc.messages[0]}], "credited": [],
                         "packet": [], "expect": q.expect.model_dump(mode="json", exclude_defaults=True)})
            continue
        spec = spec_for(q, st)
        outcome = make_pipeline(pipeline).run(spec)
        failures = check(q.expect, outcome.packet, st, spec.include_private)
        tri = outcome.stages.get(decider.traced, {})
        ph = outcome.stages.get(spanner.traced)
        refusals = []
        if outcome.packet.decision != "retrieve":
            refusals.append({"rule": f"{decider.name}:{outcome.packet.decision}", "text": outcome.packet.reason})
        elif ph is not None:
            spans = ph.get("tested", [])
            if not ph.get("tested_total"):
                refusals.append({"rule": f"{spanner.name}:no span", "text": "no span tested: the query holds no two "
                                 "adjacent words in one run, and a single word is already a token"})
            for s in spans:
                if s["refused"]:
                    refusals.append({"rule": f"{spanner.name}:" + _rule(s["refused"]), "span": s["span"],
                                     "text": f"{s['span']!r}: {s['refused']}"})
        rows.append({"name": q.name, "query": spec.query, "decision": outcome.packet.decision,
                     "reason": tri.get("reason", outcome.packet.reason), "passed": not failures,
                     "failures": failures, "refusals": refusals,
                     "credited": [s["span"] for s in (ph or {}).get("tested", []) if s["credited"]],
                     "packet": outcome.packet.ids()[:5],
                     "expect": q.expect.model_dump(mode="json", exclude_defaults=True)})
    kinds = sorted({r["rule"] for row in rows for r in row["refusals"]})
    summary = [f"{len(rows)} controls, each run under {pipeline}: "
               f"{sum(r['passed'] for r in rows)} hold their expectations.",
               f"{len(kinds)} distinct refusals: " + ", ".join(kinds) + "." if kinds else "No control was refused."]
    return {"id": "controls", "stage": "controls", "title": "The case's negative controls", "summary": summary,
            "state": {}, "ranking": [], "focus": [], "changes": [], "unlisted": {}, "controls": rows}


def _rule(refused: str) -> str:
    """A refusal's rule: its words before the first quoted or counted value."""
    words = []
    for w in refused.split():
        if w[:1] in "'\"" or w[:1].isdigit():
            words.append("N" if w[:1].isdigit() else "X")
            continue
        words.append(w.strip(",;"))
    return " ".join(words)

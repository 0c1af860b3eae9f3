"""The structured pipeline: similarity broadens recall, structure restores the boundary.

    triage -> candidates -> structure -> phrase -> lanes + standout -> pack -> packet + trace

Scores: a candidate's rank score is its relevance (the BM25 score as a fraction of the
query's saturation ceiling, plus the embedding cosine above a floor, rescaled), plus a
structure bonus (a resolved topic, decayed one hop out, and a resolved entity), plus a
phrase bonus. Checkpoints and fidelity never change a score: they are notes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from garden.derived import indexes as _index
from garden.analyzer import without_function_words
from garden.rerank.candidates import Candidate, by_score
from garden.models import Budget, Packet, Rejection
from garden.rerank.pack import attach_predecessors, pack
from garden.rerank.phrase import phrase_credit
from garden.pipelines import Outcome, evidence_label, scored
from garden.rerank.query import QuerySpec
from garden.rerank.resolve import Resolution, resolve
from garden.retrievers import check_finite, rank
from garden.rerank.standout import DEFAULT_LANE_CAP, DEFAULT_MIN_SHARE, DEFAULT_STANDOUT, gate_lane
from garden.rerank.timeline import checkpoint_note, not_yet_observed, state_reason, superseded_as_of
from garden.rerank.triage import triage


@dataclass(frozen=True)
class Weights:
    candidates: int = 20          # retriever candidates considered per query
    semantic_floor: float = 0.35  # cosine at or below this is no evidence
    topic: float = 0.6
    entity: float = 0.6
    related_decay: float = 0.5
    phrase_weight: float = 1.0
    phrase_ceiling: int = 2
    view_fraction: float = 0.5
    standout: float = DEFAULT_STANDOUT
    lane_cap: int = DEFAULT_LANE_CAP
    min_share: float = DEFAULT_MIN_SHARE


def weights_for(spec: QuerySpec) -> Weights:
    return Weights(**spec.settings.model_dump(exclude_none=True))


def chain(head: Candidate) -> list[Candidate]:
    """Every predecessor riding behind `head`, newest first."""
    out: list[Candidate] = []
    for p in head.predecessors:
        out.append(p)
        out.extend(chain(p))
    return out


def label_weak_support(cands) -> None:
    """`lexical_only` or `semantic_only` for a candidate nothing stronger supports."""
    for c in cands:
        if not {"structured_context", "phrase_match", "provenance_supported"} & set(c.labels):
            c.label(evidence_label(c.scores))


class StructuredPipeline:
    def __init__(self, name: str = "default", retriever: str = "hybrid"):
        self.name, self.retriever_name = name, retriever

    def run(self, spec: QuerySpec) -> Outcome:
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[stage] = round((now - clock) * 1e3, 3)
            clock = now

        w = weights_for(spec)
        story = spec.story
        res = resolve(story, spec.query, spec.hints, w.related_decay)
        tri = triage(spec.query, res)
        stages: dict = {"triage": {"decision": tri.decision, "reason": tri.reason, "fallback": tri.fallback},
                        "resolution": {"topics": res.topics, "entities": res.entities,
                                       "projects": sorted(res.projects), "explicit_ids": res.explicit_ids}}
        lap("triage")
        if tri.decision != "retrieve":
            reason = tri.reason + (f" Question: {tri.question}" if tri.question else "")
            packet = Packet(decision=tri.decision, reason=reason, warnings=res.warnings,
                            budget=Budget(limit=spec.budget, used=0), fallback=tri.fallback)
            return Outcome(packet, stages, timings)

        cands = self._candidates(spec, res, w)
        lap("candidates")
        self._structure(spec, res, w, cands)
        lap("structure")
        stages["phrase"] = self._phrase(spec, w, cands)
        lap("phrase")
        label_weak_support(cands.values())
        live = {rid: c for rid, c in cands.items() if c.reason is None}
        self._supersession(spec, live, cands)
        delivered_floor = self._session(spec, cands)
        lap("supersession")
        curated, evidence, stages["standout"] = self._lanes(spec, w, cands, delivered_floor)
        lap("lanes")
        packed, used = pack(attach_predecessors(curated), spec.budget)
        evidence = self._provenance(spec, packed, evidence, cands)
        more, used = pack(evidence, spec.budget, used)
        packed += more
        packed_ids = {c.id for c in packed}
        for c in cands.values():
            if c.id in packed_ids or c.reason is not None:
                continue
            if c.successor is not None:
                c.reject("predecessor_without_successor", f"its successor {c.successor.id} is not in the packet")
            else:
                c.reject("rank_cut", "not selected in its lane")
        lap("pack")
        stages["candidates"] = [{"id": c.id, "scores": {k: round(v, 6) for k, v in c.scores.items()},
                                 "score": round(c.score, 6), "lane": c.lane} for c in by_score(list(cands.values()))]
        packet = Packet(decision="retrieve", reason=tri.reason, warnings=res.warnings,
                        items=[c.item() for c in packed],
                        rejected=[Rejection(id=c.id, reason=c.reason, detail=c.detail)
                                  for c in sorted(cands.values(), key=lambda c: c.id) if c.id not in packed_ids],
                        budget=Budget(limit=spec.budget, used=used), fallback=tri.fallback)
        return Outcome(packet, stages, timings)

    # --- stages ----------------------------------------------------------------

    def _candidates(self, spec: QuerySpec, res: Resolution, w: Weights) -> dict[str, Candidate]:
        story = spec.story
        retriever = _index.retriever_for(story, self.retriever_name)
        fused, members = scored(retriever, spec.query)
        ids = [rid for rid, s in rank(fused, w.candidates) if s > 0]
        anchored = {r.id for r in story.records if r.kind != "control" and (
            set(r.topics) & set(res.topics) or set(r.entities) & set(res.entities) or r.id in res.explicit_ids)}
        ids += sorted(anchored)
        content = without_function_words(spec.query)
        parts = getattr(retriever, "members", {retriever.name: retriever})
        lexical = {n: m.score(content) for n, m in parts.items() if hasattr(m, "ceiling")}
        for n, scores in lexical.items():
            check_finite(n, scores)
        ceilings = {n: parts[n].ceiling(content) for n in lexical}
        cands: dict[str, Candidate] = {}
        for rid in ids:
            if rid in cands:
                continue
            c = Candidate(story.by_id[rid], {k: v.get(rid, 0.0) for k, v in members.items()})
            c.score = self._relevance(parts, lexical, ceilings, w.semantic_floor, c)
            if c.score > 0 or rid in anchored:
                cands[rid] = c
        for rid in res.explicit_ids:
            c = cands.get(rid)
            if c is None:  # only a control record is never indexed nor anchored
                c = cands[rid] = Candidate(story.by_id[rid])
                c.reject("control_plane", "a control record: stored and validated, never served")
                continue
            c.certain = True
            c.why.append("named by id in the query")
        return cands

    def _relevance(self, members: dict, lexical: dict[str, dict[str, float]], ceilings: dict[str, float],
                   semantic_floor: float, c: Candidate) -> float:
        """Lexical score as a fraction of the query's ceiling (content words only), plus the
        cosine above a floor, rescaled to [0, 1]."""
        total = 0.0
        for name, raw in c.scores.items():
            if name in lexical:
                value = lexical[name].get(c.id, 0.0) / ceilings[name] if ceilings[name] > 0 else 0.0
                if value > 0:
                    c.why.append(f"{name} {value:.3f} of the query's best possible match")
            elif name == "dense":
                value = max(0.0, raw - semantic_floor) / (1 - semantic_floor)
                if value > 0:
                    c.why.append(f"dense cosine {raw:.3f}")
            else:
                value = raw
            total += value
        return total

    def _structure(self, spec: QuerySpec, res: Resolution, w: Weights, cands: dict[str, Candidate]) -> None:
        story, as_of = spec.story, spec.as_of
        for c in cands.values():
            r = c.record
            if c.reason is not None:
                continue
            if r.private and not spec.include_private:
                c.reject("private", "private record; the query does not allow private records")
                continue
            if not_yet_observed(r, as_of):
                c.reject("not_yet_observed", f"appears {r.appeared_at}, after as_of {as_of}")
                continue
            why_not_current = state_reason(r, story, as_of)
            if why_not_current:
                c.reject(why_not_current, f"state is not current on {as_of}"
                         + (f"; superseded by {r.superseded_by}" if r.superseded_by else ""))
                continue
            project = story.project_of(r)
            if res.projects and project not in res.projects and not c.certain:
                c.reject("out_of_scope", f"project {project}; the query is scoped to {', '.join(sorted(res.projects))}")
                continue
            topic_hits = {t: res.topics[t] for t in r.topics if t in res.topics}
            entity_hits = [e for e in r.entities if e in res.entities]
            if topic_hits:
                best = max(topic_hits, key=lambda t: (topic_hits[t], t))
                c.score += w.topic * topic_hits[best]
                c.label("structured_context", res.topic_why[best])
            if entity_hits:
                c.score += w.entity
                c.label("structured_context", res.entities[entity_hits[0]])
            clash = []
            if res.topics and r.topics and not topic_hits:
                clash.append(f"topics {', '.join(r.topics)} (query: {', '.join(res.topics)})")
            if res.entities and r.entities and not entity_hits:
                clash.append(f"entities {', '.join(r.entities)} (query: {', '.join(res.entities)})")
            if clash and not c.certain:
                c.reject("off_topic", "its fields contradict what the query resolved: " + "; ".join(clash))
                continue
            note = checkpoint_note(r, as_of) if r.kind == "state" else None
            if note:
                c.label("checkpoint_passed", note)
            if r.kind == "view":
                c.label("derived_view", "a view restating evidence held elsewhere")
            if r.effective_fidelity in ("summary", "projection") and r.kind not in ("state", "decision"):
                c.why.append(f"fidelity {r.effective_fidelity}: reported as a {r.effective_fidelity}, not a transcript")

    def _phrase(self, spec: QuerySpec, w: Weights, cands: dict[str, Candidate]) -> dict:
        index = _index.phrase_index_for(spec.story)
        kinds = {r.id: r.kind for r in spec.story.records}
        credit = phrase_credit(index, spec.query, kinds, w.phrase_ceiling, w.phrase_weight, w.view_fraction)
        for rid, bonus in credit.bonus.items():
            c = cands.get(rid)
            if c is None and not spec.story.by_id[rid].kind == "control":
                c = cands[rid] = Candidate(spec.story.by_id[rid])
                self._structure(spec, Resolution(), w, {rid: c})
            if c is None or c.reason is not None:
                continue
            c.score += bonus
            c.label("phrase_match", f"holds the rare in-order span {credit.span[rid]!r}")
        return credit.summary()

    def _supersession(self, spec: QuerySpec, live: dict[str, Candidate], cands: dict[str, Candidate]) -> None:
        """A superseded decision rides only right behind its direct successor. A successor
        that is itself superseded rides behind its own, so a chain packs newest first
        (wood, propane, kerosene); the chain's head ranks with the best score in it."""
        story = spec.story
        queue = sorted((c for c in live.values() if c.record.kind == "decision"), key=lambda c: c.id)
        seen: set[str] = set()
        while queue:
            c = queue.pop(0)
            if c.id in seen or c.reason is not None:
                continue
            seen.add(c.id)
            successor_id = superseded_as_of(c.record, story, spec.as_of)
            if successor_id is None:
                continue
            succ = cands.get(successor_id)
            if succ is None:
                succ = cands[successor_id] = Candidate(story.by_id[successor_id])
                self._structure(spec, Resolution(), weights_for(spec), {successor_id: succ})
                succ.label("structured_context", f"successor of {c.id} (its superseded_by field)")
                queue.append(succ)
            c.label("conflicting_or_superseded", f"superseded by {successor_id}: history, not current advice")
            c.successor = succ
            if succ.reason is not None:
                c.reject("predecessor_without_successor", f"its successor {successor_id} is not selectable "
                                                          f"({succ.reason})")
                continue
            succ.predecessors.append(c)
        for c in cands.values():  # the head of each chain ranks with the best score in it
            if c.successor is None and c.predecessors:
                c.score = max([c.score] + [p.score for p in chain(c)])


    def _session(self, spec: QuerySpec, cands: dict[str, Candidate]) -> dict[str, float]:
        """Items delivered earlier in the session are not served again; the best score this
        query gives one of them floors each lane's rival."""
        floor = {"curated": 0.0, "evidence": 0.0}
        delivered: set[str] = set()
        for earlier in spec.session:
            delivered |= set(self.run(spec.earlier(earlier)).packet.ids())
        for rid in sorted(delivered):
            c = cands.get(rid)
            if c is None:
                continue
            floor[c.lane] = max(floor[c.lane], c.score)
            c.reject("already_delivered", "packed earlier in this session")
        return floor

    def _lanes(self, spec: QuerySpec, w: Weights, cands: dict[str, Candidate], floor: dict[str, float]):
        trace = []
        riding: dict[str, list[Candidate]] = {}
        # One scoring function ranks both lanes, so the share rule measures an item against
        # the query's best item in either lane: a weak decision must not lead the packet
        # only because the curated lane is otherwise empty.
        live = sorted((c.score for c in cands.values() if c.reason is None and c.successor is None
                       and not c.certain), reverse=True)
        query_best = live[0] if live else 0.0
        # A lane that holds nothing back has no rival of its own; the query's background,
        # the first score past the cap in both lanes together, stands in for it.
        background = live[w.lane_cap] if len(live) > w.lane_cap else 0.0
        for lane in ("curated", "evidence"):
            members = [c for c in cands.values() if c.lane == lane and c.reason is None and c.successor is None]
            certain = [c for c in members if c.certain]
            ranked = by_score([c for c in members if not c.certain])
            decision = gate_lane(lane, [(c.id, c.score) for c in ranked], w.standout, w.lane_cap, floor[lane],
                                 w.min_share, query_best, background)
            trace.append(decision.trace)
            rival = decision.trace["rival"]
            for position, c in enumerate(ranked):
                if c.id in decision.below_standout:
                    c.reject("below_standout", f"the lane's ratio {decision.trace['ratio']} is below standout "
                             f"{w.standout:g}" if not decision.trace["answers"]
                             else f"{c.score:.4f} does not beat the rival {rival:.4f} by {w.standout:g}")
                elif c.id in decision.rank_cut:
                    c.reject("rank_cut", f"past the lane cap of {w.lane_cap}" if position >= w.lane_cap
                             else f"{c.score:.4f} is under {w.min_share:g} of the query's best {query_best:.4f}")
            keep = set(decision.riding)
            riding[lane] = by_score(certain + [c for c in ranked if c.id in keep])
        return riding["curated"], riding["evidence"], trace

    def _provenance(self, spec: QuerySpec, packed: list[Candidate], evidence: list[Candidate],
                    cands: dict[str, Candidate]) -> list[Candidate]:
        """Sources of packed items follow them into the evidence lane, in that lane's order."""
        chosen = {c.id: c for c in evidence}
        for item in packed:
            for sid in item.record.sources:
                src = cands.get(sid)
                if src is None:
                    src = cands[sid] = Candidate(spec.story.by_id[sid])
                    self._structure(spec, Resolution(), weights_for(spec), {sid: src})
                if src.reason in ("private", "not_yet_observed", "control_plane"):
                    continue
                src.reason, src.detail = None, None
                src.certain = True
                src.labels = [x for x in src.labels if x not in ("lexical_only", "semantic_only")]
                src.label("provenance_supported", f"source of {item.id}")
                chosen[sid] = src
        return by_score(list(chosen.values()))

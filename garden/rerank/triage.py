"""Triage: RETRIEVE, ASK or SKIP, with the reason.

Rules, in order, each deterministic:
1. SKIP a self-contained question (definitional, spelling, translation, arithmetic) that
   carries no marker of shared history: it needs no memory at all.
2. ASK which one is meant when the only anchor is a word that heads the aliases of two or
   more entities ("the captain": observatory or ship). ASK too when history is clearly
   needed (we, our, I, my, remember, change...) but nothing anchors it: no topic, entity,
   hint or record id resolved and no distinctive word left once function words and vague
   verbs are gone. The question names the missing anchor.
3. RETRIEVE when anything anchors the query, keeping its distinctive words verbatim.
4. Otherwise RETRIEVE as a fallback, flagged, so `garden run` can count how often no rule
   decided.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from garden.analyzer import function_words, word_runs
from garden.rerank.resolve import Resolution
from garden.rerank.context import StageBase

DEFINITIONAL = [
    re.compile(r"^\s*what\s+(?:does|do)\s+(?:the\s+(?:word|term)\s+)?[\w' -]+?\s+mean\b", re.I),
    re.compile(r"^\s*what\s+is\s+the\s+meaning\s+of\b", re.I),
    re.compile(r"^\s*(?:define|definition\s+of)\b", re.I),
    re.compile(r"^\s*how\s+(?:do\s+you|to)\s+(?:spell|pronounce)\b", re.I),
    re.compile(r"^\s*translate\b", re.I),
    re.compile(r"^\s*(?:what\s+is\s+)?[\d\s.+*/()-]+[+*/-][\d\s.+*/()=?-]+$", re.I),
]
HISTORY_MARKERS = frozenset(
    "i me my mine we us our ours remember recall earlier before lately recently last "
    "originally previously again still since ago yesterday did decide decided choose chose changed "
    "switched".split()
)
# Chinese and Japanese markers of shared history ("remember", "we", "that time", "before").
HISTORY_CJK = re.compile(r"记得|我们|那次|上次|以前|之前|咱们|覚えて|私たち|あの時|この前")
ANAPHORA = frozenset("it that this them those these there he she they him her".split())
VAGUE = frozenset(
    "why what when how who which where did do does done change changed changing choose chose "
    "chosen decide decided make made get got say said think thought thing things stuff happen "
    "happened go went like felt feel again still ever really just back".split()
)


@dataclass
class Triage:
    decision: str
    reason: str
    fallback: bool = False
    question: str | None = None


def words(query: str) -> list[str]:
    return [w for run in word_runs(query) for w in run]


def distinctive_words(query: str) -> list[str]:
    """Words that carry content: not function words, not history markers, not vague verbs."""
    return [w for w in words(query)
            if w not in function_words() and w not in HISTORY_MARKERS and w not in VAGUE and len(w) > 1]


_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2,}")
_CJK_FILLER = re.compile(r"吗|呢|吧|的|了|是|在|有|没有|什么|怎么|为什么|你|他|她|它|这|那|个|过|里|还")


def cjk_content(query: str) -> list[str]:
    """Chinese or Japanese runs that still carry content once history markers and filler
    characters are taken out (a bag of characters has no word list to consult)."""
    stripped = _CJK_FILLER.sub(" ", HISTORY_CJK.sub(" ", query))
    return _CJK_RUN.findall(stripped)


def triage(query: str, resolution: Resolution) -> Triage:
    ws = words(query)
    markers = sorted({w for w in ws if w in HISTORY_MARKERS} | set(HISTORY_CJK.findall(query)))
    if not markers and not resolution.anchored and any(p.search(query) for p in DEFINITIONAL):
        return Triage("skip", "self-contained question (definitional or general); it needs no history")
    if markers and not resolution.anchored and resolution.ambiguous:
        head, eids = next(iter(resolution.ambiguous.items()))
        return Triage("ask", f"{head!r} could mean {' or '.join(eids)}, and nothing else anchors the question",
                      question=f"Which {head} do you mean: {' or '.join(e.replace('_', ' ') for e in eids)}?")
    content = distinctive_words(query) + cjk_content(query)
    if markers and not resolution.anchored and not content:
        pronoun = next((w for w in ws if w in ANAPHORA), None)
        missing = f"what {pronoun!r} refers to" if pronoun else "what the question is about"
        question = (f"Which thing do you mean by {pronoun!r}? Name the topic, decision or record."
                    if pronoun else "What is this about? Name the topic, decision or record.")
        return Triage("ask", f"history is needed ({', '.join(markers)}) but nothing anchors it: "
                             f"missing {missing}", question=question)
    anchors = []
    if resolution.topics:
        anchors.append("topics " + ", ".join(t for t, w in resolution.topics.items() if w == 1.0))
    if resolution.entities:
        anchors.append("entities " + ", ".join(resolution.entities))
    if resolution.explicit_ids:
        anchors.append("records " + ", ".join(resolution.explicit_ids))
    if content:
        anchors.append("distinctive words kept verbatim: " + " ".join(content))
    if markers or resolution.anchored:
        why = f"history marker ({', '.join(markers)})" if markers else "anchored query"
        return Triage("retrieve", f"{why}; " + "; ".join(anchors))
    return Triage("retrieve", "no triage rule decided; defaulted to retrieve"
                  + (f" ({'; '.join(anchors)})" if anchors else ""), fallback=True)


class TriageStage(StageBase, name="triage", mode="decides", writes=("reason", "fallback"),
                  title="Triage: retrieve, ask or skip",
                  drawn="RETRIEVE | ASK | SKIP, with the reason",
                  step="decision"):
    """The triage stage: RETRIEVE, ASK (with the question) or SKIP, with the reason. Without
    it every query retrieves."""

    def run(self, ctx) -> None:
        tri = triage(ctx.spec.query, ctx.resolution)
        ctx.trace["triage"] = {"decision": tri.decision, "reason": tri.reason, "fallback": tri.fallback}
        ctx.reason, ctx.fallback = tri.reason, tri.fallback
        if tri.decision != "retrieve":
            ctx.stop(tri.decision, tri.reason, tri.fallback, tri.question)

"""Packing: greedy within budget, and a predecessor only right behind its packed successor."""
from __future__ import annotations

from garden.rerank.candidates import Candidate
from garden.models import Record
from garden.rerank.pack import attach_predecessors, pack


def cand(rid: str, size: int, kind: str = "note") -> Candidate:
    return Candidate(Record(id=rid, kind=kind, text="x" * size))


def link(successor: Candidate, *predecessors: Candidate) -> None:
    for p in predecessors:
        p.successor = successor
        successor.predecessors.append(p)


def ids(cands) -> list[str]:
    return [c.id for c in cands]


def test_everything_that_fits_is_packed_in_order():
    order = [cand("a", 10), cand("b", 20), cand("c", 30)]
    packed, used = pack(order, budget=100)
    assert ids(packed) == ["a", "b", "c"]
    assert used == 60
    assert all(c.reason is None for c in order)


def test_an_exact_fit_is_packed():
    packed, used = pack([cand("a", 40), cand("b", 60)], budget=100)
    assert ids(packed) == ["a", "b"] and used == 100


def test_greedy_skips_what_does_not_fit_and_goes_on():
    a, big, c = cand("a", 10), cand("big", 50), cand("c", 5)
    packed, used = pack([a, big, c], budget=20)
    assert ids(packed) == ["a", "c"]
    assert used == 15
    assert big.reason == "over_budget"
    assert big.detail == "50 characters do not fit in the 10 left"


def test_packing_continues_from_what_is_already_used():
    a, b = cand("a", 10), cand("b", 10)
    packed, used = pack([a, b], budget=25, used=10)
    assert ids(packed) == ["a"] and used == 20
    assert b.reason == "over_budget"


def test_a_rationale_counts_against_the_budget():
    d = Candidate(Record(id="d", kind="decision", text="x" * 10, rationale="y" * 10))
    packed, used = pack([d], budget=20)
    assert packed == [] and d.reason == "over_budget"
    assert len(d.record.body) == len("x" * 10 + " Rationale: " + "y" * 10)


def test_an_already_rejected_candidate_is_never_packed_and_keeps_its_reason():
    a = cand("a", 1)
    a.reject("off_topic", "elsewhere")
    packed, used = pack([a, cand("b", 1)], budget=100)
    assert ids(packed) == ["b"] and used == 1
    assert (a.reason, a.detail) == ("off_topic", "elsewhere")


def test_the_first_rejection_sticks():
    a = cand("a", 1)
    a.reject("over_budget")
    a.reject("rank_cut")
    assert a.reason == "over_budget"


# --- predecessors ---------------------------------------------------------------------------


def test_attach_predecessors_puts_each_right_behind_its_successor():
    new, old = cand("decision.new", 10, "decision"), cand("decision.old", 10, "decision")
    other = cand("state.x", 10, "state")
    link(new, old)
    assert ids(attach_predecessors([new, other])) == ["decision.new", "decision.old", "state.x"]


def test_a_predecessor_rides_adjacent_to_its_successor_in_the_packet():
    first, new, old, last = (cand("a", 5, "state"), cand("decision.new", 5, "decision"),
                             cand("decision.old", 5, "decision"), cand("z", 5, "state"))
    link(new, old)
    packed, _ = pack(attach_predecessors([first, new, last]), budget=100)
    assert ids(packed) == ["a", "decision.new", "decision.old", "z"]
    assert old.successor is new


def test_a_predecessor_is_never_admitted_without_its_successor():
    new, old = cand("decision.new", 80, "decision"), cand("decision.old", 10, "decision")
    link(new, old)
    packed, used = pack(attach_predecessors([new]), budget=50)
    assert packed == [] and used == 0
    assert new.reason == "over_budget"
    assert old.reason == "predecessor_without_successor"
    assert old.detail == "its successor decision.new is not in the packet"


def test_a_predecessor_of_an_already_rejected_successor_is_not_admitted():
    new, old = cand("decision.new", 5, "decision"), cand("decision.old", 5, "decision")
    link(new, old)
    new.reject("below_standout")
    packed, _ = pack(attach_predecessors([new]), budget=100)
    assert packed == []
    assert old.reason == "predecessor_without_successor"


def test_a_predecessor_ahead_of_its_successor_is_not_admitted():
    new, old = cand("decision.new", 5, "decision"), cand("decision.old", 5, "decision")
    old.successor = new
    packed, _ = pack([old, new], budget=100)
    assert ids(packed) == ["decision.new"]
    assert old.reason == "predecessor_without_successor"


def test_a_predecessor_that_does_not_fit_is_over_budget_and_the_successor_stays():
    new, old = cand("decision.new", 10, "decision"), cand("decision.old", 50, "decision")
    link(new, old)
    packed, used = pack(attach_predecessors([new]), budget=30)
    assert ids(packed) == ["decision.new"] and used == 10
    assert old.reason == "over_budget"


def test_several_predecessors_follow_their_successor():
    new, old1, old2 = (cand("d.new", 5, "decision"), cand("d.old1", 5, "decision"), cand("d.old2", 5, "decision"))
    link(new, old1, old2)
    packed, _ = pack(attach_predecessors([new]), budget=100)
    assert ids(packed) == ["d.new", "d.old1", "d.old2"]


def test_a_chain_packs_newest_first_and_stops_at_the_first_link_that_does_not_fit():
    from garden.rerank.candidates import Candidate
    from garden.models import Record
    from garden.rerank.pack import attach_predecessors, pack

    def decision(rid, size):
        return Candidate(Record(id=rid, kind="decision", text="x" * size))

    head, middle, oldest = decision("c", 10), decision("b", 30), decision("a", 5)
    head.predecessors, middle.successor = [middle], head
    middle.predecessors, oldest.successor = [oldest], middle
    order = attach_predecessors([head])
    assert [c.id for c in order] == ["c", "b", "a"]
    packed, used = pack(order, budget=20)
    assert [c.id for c in packed] == ["c"] and used == 10
    assert (middle.reason, oldest.reason) == ("over_budget", "predecessor_without_successor")

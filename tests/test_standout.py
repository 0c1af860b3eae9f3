"""The standout ratio: best / rival, per lane, and the gate it drives."""
from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from garden.models import check_standout
from garden.rerank.stages import Settings
from garden.rerank.standout import DEFAULT_LANE_CAP, DEFAULT_MIN_SHARE, DEFAULT_STANDOUT, select_lane, standout_ratio


def test_defaults():
    assert DEFAULT_STANDOUT == 1.4
    assert DEFAULT_LANE_CAP == 3
    assert DEFAULT_MIN_SHARE == 0.25  # experiments/locomo_gate.py, every one of fourteen folds over both benchmarks


# --- the formula ---------------------------------------------------------------------


def test_rival_is_the_first_score_past_the_cap():
    ratio, rival = standout_ratio([10.0, 8.0, 6.0, 4.0, 2.0], cap=3)
    assert rival == 4.0
    assert ratio == pytest.approx(10.0 / 4.0)


def test_the_cap_moves_the_rival():
    assert standout_ratio([10.0, 8.0, 6.0, 4.0], cap=1) == (pytest.approx(10.0 / 8.0), 8.0)
    assert standout_ratio([10.0, 8.0, 6.0, 4.0], cap=2) == (pytest.approx(10.0 / 6.0), 6.0)


def test_the_floor_raises_the_rival():
    ratio, rival = standout_ratio([10.0, 8.0, 6.0, 4.0], cap=3, floor=5.0)
    assert rival == 5.0
    assert ratio == pytest.approx(2.0)


def test_a_floor_below_the_held_back_score_changes_nothing():
    assert standout_ratio([10.0, 8.0, 6.0, 4.0], cap=3, floor=1.0) == standout_ratio([10.0, 8.0, 6.0, 4.0], cap=3)


def test_nothing_held_back_gives_an_infinite_ratio():
    ratio, rival = standout_ratio([10.0, 8.0], cap=3)
    assert math.isinf(ratio) and rival == 0.0
    ratio, rival = standout_ratio([10.0, 8.0, 6.0, 0.0], cap=3)
    assert math.isinf(ratio) and rival == 0.0


def test_nothing_held_back_with_a_floor_is_finite():
    ratio, rival = standout_ratio([10.0, 8.0], cap=3, floor=4.0)
    assert (ratio, rival) == (pytest.approx(2.5), 4.0)


def test_empty_and_non_positive_lanes():
    assert standout_ratio([]) == (0.0, 0.0)
    assert standout_ratio([], floor=3.0) == (0.0, 3.0)
    assert standout_ratio([0.0, 0.0, 0.0, 0.0])[0] == 0.0


def test_the_ratio_is_scale_free():
    a = standout_ratio([10.0, 8.0, 6.0, 4.0])[0]
    b = standout_ratio([0.010, 0.008, 0.006, 0.004])[0]
    assert a == pytest.approx(b)


def test_unsorted_scores_and_a_bad_cap_are_refused():
    with pytest.raises(ValueError, match="sorted"):
        standout_ratio([1.0, 2.0])
    with pytest.raises(ValueError, match="cap"):
        standout_ratio([2.0, 1.0], cap=0)


# --- the gate --------------------------------------------------------------------------


def lane(*scores: float) -> list[tuple[str, float]]:
    return [(f"r{i}", s) for i, s in enumerate(scores)]


def test_a_lane_that_stands_out_answers():
    d = select_lane("curated", lane(10.0, 9.0, 8.0, 2.0, 1.0), standout=1.4)
    assert d.riding == ["r0", "r1", "r2"]
    assert d.below_standout == []
    assert d.rank_cut == ["r3", "r4"]
    assert d.trace["answers"] is True
    assert d.trace["ratio"] == 5.0 and d.trace["rival"] == 2.0 and d.trace["best"] == 10.0


def test_a_flat_lane_is_silent():
    d = select_lane("evidence", lane(10.0, 9.5, 9.0, 8.0, 7.0), standout=1.4)
    assert d.riding == []
    assert d.below_standout == ["r0", "r1", "r2"]
    assert d.rank_cut == ["r3", "r4"]
    assert d.trace["answers"] is False
    assert d.trace["ratio"] == pytest.approx(1.25)


def test_each_riding_item_must_beat_the_rival_by_the_ratio():
    # best/rival = 10/4 = 2.5 answers; 6/4 = 1.5 rides; 5/4 = 1.25 does not
    d = select_lane("curated", lane(10.0, 6.0, 5.0, 4.0), standout=1.4)
    assert d.trace["answers"] is True
    assert d.riding == ["r0", "r1"]
    assert d.below_standout == ["r2"]
    assert d.rank_cut == ["r3"]


def test_an_item_exactly_at_the_ratio_rides():
    d = select_lane("curated", lane(10.0, 5.6, 4.0, 4.0), standout=1.4, cap=3)
    assert d.riding == ["r0", "r1"]
    assert d.below_standout == ["r2"]


def test_the_delivered_floor_can_silence_a_lane():
    ranked = lane(10.0, 3.0)
    assert select_lane("curated", ranked).riding == ["r0", "r1"]      # nothing held back: infinite ratio
    d = select_lane("curated", ranked, delivered_floor=8.0)
    assert d.riding == [] and d.below_standout == ["r0", "r1"]
    assert d.trace["rival"] == 8.0 and d.trace["floor"] == 8.0


def test_infinite_ratio_is_traced_as_such():
    d = select_lane("curated", lane(10.0, 3.0))
    assert d.trace["ratio"] is None and d.trace["ratio_infinite"] is True
    assert d.riding == ["r0", "r1"]


def test_standout_one_turns_the_cutoff_off_and_ignores_the_floor():
    d = select_lane("evidence", lane(10.0, 9.9, 9.8, 9.7, 9.6), standout=1, delivered_floor=100.0)
    assert d.trace["active"] is False
    assert d.trace["floor"] == 0.0
    assert d.riding == ["r0", "r1", "r2"]
    assert d.below_standout == []
    assert d.rank_cut == ["r3", "r4"]


def test_the_cap_applies_whether_or_not_the_cutoff_is_on():
    d = select_lane("curated", lane(10.0, 1.0, 0.5, 0.1), standout=1.4, cap=1)
    assert d.riding == ["r0"] and d.rank_cut == ["r1", "r2", "r3"]


def test_an_item_under_the_share_of_the_best_is_cut_by_rank():
    # nothing held back: the ratio is infinite, yet a near-zero neighbour does not ride
    d = select_lane("curated", lane(10.0, 4.0, 0.9), standout=1.4)
    assert d.trace["ratio_infinite"] is True
    assert d.riding == ["r0", "r1"]
    assert d.rank_cut == ["r2"]
    assert d.trace["min_share"] == DEFAULT_MIN_SHARE


def test_the_share_rule_stays_when_the_cutoff_is_off():
    d = select_lane("curated", lane(10.0, 5.0, 0.5), standout=1, min_share=0.2)
    assert d.riding == ["r0", "r1"] and d.rank_cut == ["r2"] and d.below_standout == []
    d = select_lane("curated", lane(10.0, 5.0, 0.5), standout=1, min_share=0.0)
    assert d.riding == ["r0", "r1", "r2"]


def test_the_share_rule_is_relative_to_the_lane_best():
    assert select_lane("curated", lane(0.010, 0.006, 0.001), min_share=0.5).rank_cut == ["r2"]
    assert select_lane("curated", lane(0.010, 0.006, 0.001), min_share=0.5).riding == ["r0", "r1"]


def test_a_lane_whose_best_is_zero_has_no_share_rule_and_does_not_answer():
    d = select_lane("curated", lane(0.0, 0.0))
    assert d.rank_cut == [] and d.riding == [] and d.below_standout == ["r0", "r1"]
    assert d.trace["answers"] is False


def test_an_empty_lane_rides_nothing():
    d = select_lane("curated", [])
    assert (d.riding, d.below_standout, d.rank_cut) == ([], [], [])
    assert d.trace["best"] is None and d.trace["answers"] is False


# --- refusing what is not a ratio -----------------------------------------------------------


@pytest.mark.parametrize("value", [0.9, 0, -2, float("nan"), float("inf"), "1.5", True, None, [1.4]])
def test_check_standout_refuses_what_is_not_a_ratio(value):
    with pytest.raises(ValueError) as info:
        check_standout(value)
    msg = str(info.value)
    assert "ratio" in msg and "not a score" in msg
    assert repr(value) in msg


@pytest.mark.parametrize("value", [1, 1.0, 1.4, 3])
def test_check_standout_accepts_ratios(value):
    assert check_standout(value) == float(value)


def test_select_lane_refuses_a_score_passed_as_the_ratio():
    with pytest.raises(ValueError, match="not a score"):
        select_lane("curated", lane(10.0, 1.0), standout=0.5)


@pytest.mark.parametrize("value", [0.5, "high", False, float("nan")])
def test_settings_refuse_a_standout_below_one(value):
    with pytest.raises(ValidationError) as info:
        Settings(standout=value)
    assert "ratio" in str(info.value) and "not a score" in str(info.value)


def test_settings_accept_a_ratio_and_merge():
    base = Settings(standout=2)
    assert base.standout == 2.0 and isinstance(base.standout, float)
    assert base.merged(Settings(lane_cap=2)) == Settings(standout=2.0, lane_cap=2)
    assert base.merged(Settings(standout=1.0)).standout == 1.0
    assert base.merged(None) is base


def test_a_zero_score_never_rides_even_with_the_cutoff_off():
    d = select_lane("curated", lane(0.0), standout=1)
    assert d.riding == [] and d.rank_cut == ["r0"]


def test_a_lane_that_holds_nothing_back_borrows_the_query_background():
    # two candidates, nothing past the cap: alone the ratio would be unbounded
    alone = select_lane("curated", lane(0.117, 0.088))
    assert alone.trace["answers"] and alone.trace["ratio_infinite"]
    borrowed = select_lane("curated", lane(0.117, 0.088), background=0.087)
    assert not borrowed.trace["answers"] and borrowed.trace["rival"] == 0.087
    assert borrowed.below_standout == ["r0", "r1"]


def test_the_background_is_only_for_the_lane_answer_not_its_companions():
    d = select_lane("curated", lane(1.137, 0.823), background=0.6)
    assert d.trace["answers"]  # 1.137 / 0.6 beats 1.4
    assert d.riding == ["r0", "r1"]  # 0.823 is not measured against the borrowed 0.6


def test_a_lane_with_its_own_rival_ignores_the_background():
    d = select_lane("evidence", lane(10.0, 2.0, 2.0, 1.0), background=9.0)
    assert d.trace["rival"] == 1.0 and d.trace["answers"]


def test_standout_one_ignores_the_background():
    d = select_lane("curated", lane(0.117, 0.088), standout=1, background=0.087)
    assert d.riding == ["r0", "r1"]


def test_a_decide_verdict_answers_or_silences_the_lane_and_a_decisive_ratio_overrides_silence():
    ranked = lane(10.0, 9.0, 8.0, 7.0, 6.0)   # ratio 10/7: below a decisive 10
    assert select_lane("evidence", ranked, answers=False).riding == []
    assert select_lane("evidence", ranked, answers=False).trace["decided_by"] == "decide"
    assert select_lane("evidence", ranked, answers=True, fill=True, count_cap=None).riding == ["r0", "r1", "r2", "r3",
                                                                                             "r4"]
    decisive = select_lane("evidence", lane(10.0, 0.5, 0.4, 0.3, 0.2), answers=False, decisive=10.0, min_share=0.0)
    assert decisive.trace["decided_by"] == "decisive ratio" and decisive.riding[0] == "r0"
    # without a verdict the lane's own ratio decides, as before the decide stage
    assert select_lane("evidence", ranked).trace["decided_by"] == "ratio" and select_lane("evidence", ranked).riding

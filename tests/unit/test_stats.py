"""nfvperf.stats: the exact rank interval for a median, paired per-round ratios (issue 16)."""
import json
import math
import random
from fractions import Fraction

import pytest

from nfvperf.stats import (METHOD, median_interval, paired_ratios, rank_coverage, rank_pair,
                           ratio_interval, rounds_needed)


def _coverage_by_counting(n: int, k: int) -> Fraction:
    """P(x(k) ≤ m ≤ x(n−k+1)) counted directly: the number B of values below the median m is
    Bin(n, ½), and the pair covers m iff k ≤ B ≤ n − k."""
    return sum((Fraction(math.comb(n, b), 2 ** n) for b in range(k, n - k + 1)), Fraction(0))


# --------------------------------------------------------------------------- order statistics

@pytest.mark.parametrize("n,k,coverage", [
    (5, 1, 0.9375),           # 1 − 2/32: not enough for 95 %
    (6, 1, 0.96875),          # min..max, 1 − 2/64
    (10, 2, 0.978515625),     # 2nd..9th, 1 − 2·11/1024
    (20, 6, 0.9586105346679688),   # 6th..15th, 1 − 2·21700/2²⁰
])
def test_known_indices_and_coverages(n, k, coverage):
    assert rank_pair(n, 0.95) == (k, pytest.approx(coverage, abs=1e-12))
    assert float(_coverage_by_counting(n, k)) == pytest.approx(coverage, abs=1e-12)
    assert rank_coverage(n, k + 1) < 0.95 or n == 5     # the next pair in falls short (narrowest)


def test_rounded_coverages_as_the_brief_states_them():
    assert round(rank_coverage(6, 1), 3) == 0.969
    assert round(rank_coverage(10, 2), 3) == 0.979
    assert round(rank_coverage(20, 6), 3) == 0.959


@pytest.mark.parametrize("n", range(1, 41))
def test_coverage_formula_matches_counting_for_every_pair(n):
    for k in range(1, (n + 1) // 2 + 1):
        assert rank_coverage(n, k) == pytest.approx(float(_coverage_by_counting(n, k)), abs=1e-12)


def test_rounds_needed():
    assert rounds_needed(0.95) == 6
    assert rounds_needed(0.99) == 8
    assert rounds_needed(0.9) == 5


def test_median_interval_picks_the_order_statistics():
    xs = [float(v) for v in range(1, 21)]
    random.Random(3).shuffle(xs)
    iv = median_interval(xs)
    assert (iv.median, iv.lo, iv.hi, iv.n, iv.k) == (10.5, 6.0, 15.0, 20, 6)
    assert iv.enough and iv.method == METHOD == "exact rank interval (order statistics, binomial)"
    assert iv.confidence == pytest.approx(0.9586, abs=1e-4) and iv.asked == 0.95
    iv10 = median_interval(range(1, 11))
    assert (iv10.lo, iv10.hi, iv10.median) == (2.0, 9.0, 5.5)
    iv6 = median_interval([6, 1, 5, 2, 4, 3])
    assert (iv6.lo, iv6.hi) == (1.0, 6.0) and iv6.enough


def test_too_few_values_give_min_max_with_their_coverage():
    iv = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (iv.lo, iv.hi, iv.median) == (1.0, 5.0, 3.0)
    assert iv.confidence == 0.9375 and not iv.enough
    one = median_interval([7.0])
    assert (one.median, one.lo, one.hi, one.n, one.enough, one.confidence) == (7.0, 7.0, 7.0, 1, False, 0.0)
    assert median_interval([]) is None


def test_other_confidences_and_bad_input():
    assert median_interval(range(1, 11), confidence=0.8).k == 3      # 0.891 ≥ 0.8, k=4 gives 0.656
    assert not median_interval(range(1, 8), confidence=0.99).enough  # 7 < 8
    with pytest.raises(ValueError, match="confidence must be in"):
        median_interval([1.0, 2.0], confidence=95)
    with pytest.raises(ValueError, match="NaN"):
        median_interval([1.0, float("nan")])


# --------------------------------------------------------------------------- paired ratios

def test_paired_ratios_skip_failed_rounds():
    pr = paired_ratios([2.0, None, 3.0, float("nan"), 4.0, 0.0, 5.0, -1.0, 6.0],
                       [1.0, 1.0, None, 1.0, 2.0, 1.0, 0.0, 1.0, float("inf")])
    assert pr.ratios == [2.0, 2.0]
    assert pr.skipped == 7 and pr.rounds == 9


def test_paired_ratios_need_one_figure_per_round_each():
    with pytest.raises(ValueError, match="one per round"):
        paired_ratios([1.0, 2.0], [1.0])


# --------------------------------------------------------------------------- ratio interval

def test_differs_text_and_dict():
    base = [1e6] * 10
    unit = [v * 1e6 for v in (0.75, 0.74, 0.76, 0.73, 0.77, 0.75, 0.75, 0.76, 0.74, 0.75)]
    ri = ratio_interval(unit, base)
    assert ri.differs and ri.enough and ri.half_width_pct is None
    assert (ri.lo, ri.hi, ri.median, ri.n, ri.skipped) == (0.74, 0.76, 0.75, 10, 0)
    assert ri.text() == "0.75× (0.74–0.76, 95 % CI, 10 rounds)"
    d = json.loads(json.dumps(ri.to_dict()))
    assert d["text"] == ri.text() and d["method"] == METHOD and d["differs"] is True
    assert d["confidence"] == pytest.approx(0.9785, abs=1e-4)


def test_no_difference_text_gives_the_half_width():
    unit = [0.99, 1.01, 1.02, 0.98, 1.0, 1.031, 0.969, 1.0, 1.0, 1.0]
    ri = ratio_interval(unit, [1.0] * 10)
    assert not ri.differs and ri.contains(1.0)
    assert ri.half_width_pct == pytest.approx(2.0)                    # 2nd..9th: 0.98..1.02
    assert ri.text() == "no difference measured (±2.0 %)"
    ri2 = ratio_interval([0.97, 1.031, 1.0, 1.0, 0.99, 1.0], [1.0] * 6)   # min..max
    assert ri2.text() == "no difference measured (±3.1 %)"


def test_not_enough_rounds_says_so():
    ri = ratio_interval([0.98, 0.91, 1.04, 0.99], [1.0] * 4)
    assert not ri.enough and not ri.differs
    assert ri.text() == "0.98× (0.91–1.04, 88 % CI: 4 rounds, 6 give 95 %)"
    low = ratio_interval([0.5, 0.6, 0.55], [1.0] * 3)                 # excludes 1 but too few rounds
    assert not low.differs and "75 % CI: 3 rounds, 6 give 95 %" in low.text()
    assert ratio_interval([0.9], [1.0]).text() == "0.90× (1 round: no interval, 6 give 95 %)"


def test_skipped_rounds_are_told_and_not_counted():
    unit = [0.75, None, 0.74, 0.76, 0.75, 0.73, 0.77, 0.0]
    ri = ratio_interval(unit, [1.0] * 8)
    assert ri.n == 6 and ri.skipped == 2 and ri.differs
    assert ri.text() == "0.75× (0.73–0.77, 95 % CI, 6 rounds; 2 failed rounds left out)"
    assert ratio_interval([None, 0.0], [1.0, 1.0]) is None


def test_a_shift_is_detected_and_no_shift_is_not():
    rng = random.Random(11)
    base = [rng.uniform(0.9, 1.1) for _ in range(10)]
    same = ratio_interval([b * rng.gauss(1.0, 0.01) for b in base], base)
    assert not same.differs and same.half_width_pct < 3.0
    down = ratio_interval([b * 0.9 * rng.gauss(1.0, 0.01) for b in base], base)
    assert down.differs and down.hi < 1.0


# --------------------------------------------------------------------------- coverage property

@pytest.mark.parametrize("n,lo,hi", [(6, 0.95, 0.985), (10, 0.96, 0.99), (20, 0.94, 0.975)])
def test_interval_covers_the_true_median_as_often_as_it_says(n, lo, hi):
    """Ratios drawn from a skewed distribution with a known median (lognormal, median 0.8):
    over 2000 seeded studies the interval covers 0.8 about as often as its stated coverage
    (0.969, 0.979, 0.959 for n = 6, 10, 20)."""
    true_median = 0.8
    covered = 0
    for seed in range(2000):
        rng = random.Random(seed)
        unit = [true_median * math.exp(rng.gauss(0.0, 0.1)) for _ in range(n)]
        ri = ratio_interval(unit, [1.0] * n)
        covered += ri.contains(true_median)
    share = covered / 2000
    assert lo <= share <= hi, (n, share, rank_pair(n)[1])
    assert abs(share - rank_pair(n)[1]) < 0.015

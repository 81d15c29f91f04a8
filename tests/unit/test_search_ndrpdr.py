"""NDR and PDR in one pass."""
import dataclasses

import pytest

from nfvperf.search.ndrpdr import ndrpdr_search
from nfvperf.search.validity import TrialRunner

from _core_helpers import LINE_64, sim


def test_ndr_pdr_hard_limit():
    r = ndrpdr_search(TrialRunner(sim(8e6)), LINE_64, pdr_loss_ratio=0.005, relative_width=0.005)
    ndr, pdr = r.goal("ndr"), r.goal("pdr")
    assert ndr.lower_bound_pps <= 8e6 < ndr.upper_bound_pps
    assert ndr.upper_bound_pps - ndr.lower_bound_pps <= 0.005 * ndr.upper_bound_pps
    assert pdr.lower_bound_pps <= 8e6 / 0.995 < pdr.upper_bound_pps
    assert pdr.upper_bound_pps - pdr.lower_bound_pps <= 0.005 * pdr.upper_bound_pps
    assert r.load_pps == ndr.lower_bound_pps
    # one pass: far fewer trials than two binary searches
    assert r.trials_used <= 12


def test_ndrpdr_verification_full_length():
    r = ndrpdr_search(TrialRunner(sim(8e6)), LINE_64, trial_duration_s=1.0, final_duration_s=10.0)
    assert [t.phase for t in r.trials if t.duration_s == 10.0] == ["verify-ndr", "verify-pdr"]


def test_ndrpdr_line_rate():
    r = ndrpdr_search(TrialRunner(sim(20e6)), LINE_64)
    assert r.goal("ndr").irregular and r.goal("ndr").lower_bound_pps == LINE_64
    assert r.trials_used == 1


def test_ndrpdr_bad_ratio():
    with pytest.raises(ValueError):
        ndrpdr_search(TrialRunner(sim()), LINE_64, pdr_loss_ratio=0.0)


class FullLengthBroken(type(sim())):
    """Forwards nothing in full-length trials (e.g. a leak that kills long runs)."""

    def measure(self, duration_s, load_pps):
        tr = super().measure(duration_s, load_pps)
        if duration_s >= 10:
            tr = dataclasses.replace(tr, received=0)
        return tr


def test_ndrpdr_verification_failing_everywhere_terminates():
    m = FullLengthBroken(8e6)
    m.set_profile(sim().profile)
    r = ndrpdr_search(TrialRunner(m), LINE_64, trial_duration_s=1.0, final_duration_s=10.0)
    assert r.goal("ndr").lower_bound_pps == 0.0 and r.trials_used < 200
    assert r.goal("ndr").irregular and r.notes


def test_ndrpdr_dut_losing_everything_terminates_irregular():
    r = ndrpdr_search(TrialRunner(sim(0.5)), LINE_64)
    assert r.goal("ndr").irregular and r.goal("pdr").irregular and r.trials_used < 100

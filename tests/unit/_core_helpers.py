"""Helpers shared by the methodology-core unit tests (not a conftest: other suites own that)."""
from nfvperf.trial import TrafficProfile
from nfvperf.tg.sim import SimMeasurer

LINE_64 = 10e9 / (84 * 8)


def sim(capacity=8e6, bidirectional=False, latency=False, size=64, link_bps=10e9, **kw):
    m = SimMeasurer(capacity, **kw)
    m.set_profile(TrafficProfile(frame_size_b=size, bidirectional=bidirectional, latency=latency,
                                 link_speed_bps=link_bps))
    return m


class Recorder:
    def __init__(self):
        self.trials = []
        self.progress_calls = []

    def trial(self, test, tr, **ctx):
        self.trials.append((test, tr, ctx))

    def progress(self, fraction, message):
        assert 0.0 <= fraction <= 1.0
        self.progress_calls.append((fraction, message))

"""``nfvperf trend`` as tables: one row per series, and the points of each series when asked
(``--points``, or when one series is selected)."""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.trend.compute import SeriesTrend, point_dict
from rich.markup import escape
from rich.table import Table


def _f(v: Optional[float]) -> str:
    return "—" if v is None else f"{v:,.0f}"


def _change_text(c: Any) -> str:
    return f"{c.kind} {100 * (c.ratio - 1):+.1f} %"


def render(trends: list[SeriesTrend], console: Any, points: Optional[bool] = None) -> None:
    if not trends:
        console.print("no series in the store yet: run a suite first (nfvperf run ...)")
        return
    t = Table(title="nfvperf trend: series by configuration (fps per interface)", title_justify="left",
              caption="Groups: constant-average groups found by jumpavg (CSIT's MDL grouping). A change is a new "
                      "group whose mean differs from the previous group's by more than the runs' noise (search "
                      "width, repeat or round spread, host CPU steadiness). Points of running/aborted/interrupted "
                      "runs are listed, never counted.", caption_justify="left")
    for c in ("Series", "Configuration", "Runs", "Last run", "Last value", "Level", "Groups", "Changes (run: kind)"):
        t.add_column(c, justify="right" if c in ("Runs", "Last value", "Level", "Groups") else "left")
    for tr in trends:
        last = tr.runs[-1] if tr.runs else None
        level = tr.detection.groups[-1].mean if tr.detection.groups else None
        changes = "; ".join(f"{tr.runs[c.index].run}: {_change_text(c)}" for c in tr.detection.changes) or "none"
        uncounted = sum(1 for p in tr.series.points if not p.counted)
        runs = f"{len(tr.runs)}" + (f" (+{uncounted} not counted)" if uncounted else "")
        t.add_row(tr.id, escape(tr.label), runs, str(last.run) if last else "—", _f(last.value if last else None),
                  _f(level), str(len(tr.detection.groups)), escape(changes))
    console.print(t)
    if points or (points is None and len(trends) == 1):
        for tr in trends:
            render_points(tr, console)


def render_points(tr: SeriesTrend, console: Any) -> None:
    starts = {tr.runs[c.index].run: c for c in tr.detection.changes}
    group_of = {tr.runs[j].run: i + 1 for i, g in enumerate(tr.detection.groups) for j in range(g.start, g.end + 1)}
    t = Table(title=f"series {tr.id}: {escape(tr.label)}", title_justify="left")
    for col in ("Run", "Started (UTC)", "Test", "Value fps/if", "Noise ±%", "Group", "Change", "Status"):
        t.add_column(col, justify="right" if col in ("Run", "Value fps/if", "Noise ±%", "Group") else "left")
    for p in tr.series.points:
        d = point_dict(p)
        c = starts.get(p.run) if p.counted else None
        t.add_row(str(p.run), p.time.strftime("%Y-%m-%d %H:%M") if p.time else "—", escape(p.test_name),
                  _f(p.value), f"{100 * p.noise:.1f}" if p.counted else "—",
                  str(group_of.get(p.run, "")) if p.counted else "—",
                  _change_text(c) if c else "", d["status"] if d["status"] == "ok" else f"{d['status']} (not counted)")
    console.print(t)

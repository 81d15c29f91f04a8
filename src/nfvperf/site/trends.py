"""Trend pages: one per series of :func:`nfvperf.trend.trend_json` (values over the runs, the
constant-average groups drawn as mean ± stdev, each change a vertical line, red for a
regression and green for a progression) and an index of the series.

The plot is matplotlib's, inline SVG; the change markers carry ids (``change-regression-<run>``)
so a browser (and the site's test) can find them.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from nfvperf.site.render import render_page
from nfvperf.site.svg import figure_svg
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, MaxNLocator

COLORS = {"regression": "tab:red", "progression": "tab:green"}


@dataclass
class RunRef:
    label: str
    href: Optional[str] = None


@dataclass
class SeriesView:
    """One series of the trend JSON, ready for the pages."""
    id: str
    file: str
    identity: Any
    points: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    changes: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def identity_items(self) -> list[tuple[str, str]]:
        if isinstance(self.identity, dict):
            return [(str(k), _text(v)) for k, v in self.identity.items() if v not in (None, "", [], {})]
        return [("identity", _text(self.identity))]

    @property
    def identity_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.identity_items)

    @property
    def last_change(self) -> Optional[dict[str, Any]]:
        if not self.changes:
            return None
        c = self.changes[-1]
        return {"kind": c.get("kind"), "run": c.get("run"), "text": change_text(c.get("ratio"))}


def _text(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v)
    return str(v)


def series_file(sid: Any) -> str:
    """A file name for a series id: the id where it is a safe name, else a cleaned id and a hash."""
    s = str(sid)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("._")[:80] or "series"
    if safe != s:
        safe += "-" + hashlib.sha1(s.encode("utf-8")).hexdigest()[:10]
    return safe + ".html"


def series_views(trend: dict[str, Any]) -> list[SeriesView]:
    """The series of a ``trend_json`` document (points sorted by time, then run)."""
    out = []
    for s in trend.get("series") or []:
        if not isinstance(s, dict):
            continue
        pts = sorted((p for p in s.get("points") or [] if isinstance(p, dict)),
                     key=lambda p: (str(p.get("time") or ""), str(p.get("run"))))
        out.append(SeriesView(id=str(s.get("id")), file=series_file(s.get("id")), identity=s.get("identity"),
                              points=pts, groups=list(s.get("groups") or []), changes=list(s.get("changes") or []),
                              raw=s))
    return out


def counts(point: dict[str, Any]) -> bool:
    """A point the trend counted: status ``ok`` (or none given); a running or aborted run's point
    is listed and drawn apart, never grouped."""
    return point.get("status") in (None, "ok")


def change_text(ratio: Any) -> str:
    try:
        return f"{100 * (float(ratio) - 1):+.1f} %"
    except (TypeError, ValueError):
        return "—"


def noise_text(p: dict[str, Any]) -> str:
    """A point's own noise (relative) and where it came from, when the trend gives it."""
    try:
        n = float(p["noise"])
    except (KeyError, TypeError, ValueError):
        return ""
    src = p.get("noise_source")
    return f"±{100 * n:.1f} %" + (f" ({src})" if src else "")


def value_text(v: Any) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "—"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _ylabel(identity: Any) -> str:
    """The series' metric; trend values are frames/s per interface (nfvperf.trend.compute)."""
    metric = identity.get("metric") if isinstance(identity, dict) else None
    unit = "frames/s per interface"
    return f"{metric}, {unit}" if metric and unit not in str(metric) else str(metric or unit)


def trend_figure(s: SeriesView, run_label: Any) -> Any:
    """The series' values over its runs (x: the runs in time order), its groups as mean ± stdev,
    its changes as vertical lines between the last run of the old group and the first of the
    new one; ``run_label(run)``: the tick text of a run."""
    xs = {str(p.get("run")): i for i, p in enumerate(s.points)}
    fig, ax = plt.subplots(figsize=(9, 4.2))
    counted = [(i, p["value"]) for i, p in enumerate(s.points) if p.get("value") is not None and counts(p)]
    ax.plot([i for i, _ in counted], [v for _, v in counted], "o", color="tab:blue", ms=4, label="value per run",
            gid="points")
    other = [(i, p["value"]) for i, p in enumerate(s.points) if p.get("value") is not None and not counts(p)]
    if other:
        ax.plot([i for i, _ in other], [v for _, v in other], "x", color="grey", ms=7, gid="points-not-counted",
                label="not counted (running, aborted, failed)")
    for i, g in enumerate(s.groups):
        x0, x1 = xs.get(str(g.get("start_run"))), xs.get(str(g.get("end_run")))
        mean, sd = g.get("mean"), g.get("stdev") or 0.0
        if x0 is None or x1 is None or mean is None:
            continue
        ax.hlines(mean, x0 - 0.3, x1 + 0.3, colors="black", lw=1.6, gid=f"group-{i}",
                  label="group mean ± stdev" if i == 0 else "_nolegend_")
        ax.fill_between([x0 - 0.3, x1 + 0.3], [mean - sd] * 2, [mean + sd] * 2, color="grey", alpha=0.2)
    for c in s.changes:
        x = xs.get(str(c.get("run")))
        kind = str(c.get("kind"))
        if x is None:
            continue
        color = COLORS.get(kind, "tab:orange")
        ax.axvline(x - 0.5, color=color, ls="--", lw=1.4, gid=f"change-{kind}-{c.get('run')}")
        y = s.points[x].get("value")
        if y is not None:
            ax.plot([x], [y], "v" if kind == "regression" else "^", color=color, ms=12, mfc="none", mew=2,
                    label=f"{kind} {change_text(c.get('ratio'))} at run {run_label(c.get('run'))}")
    n = len(s.points)
    if n <= 16:
        ax.set_xticks(range(n))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=12, integer=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if abs(v) >= 1000 else f"{v:g}"))
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda v, _pos: run_label(s.points[int(v)].get("run")) if 0 <= int(v) < n and v == int(v) else ""))
    ax.set_xlim(-0.8, max(n - 1, 0) + 0.8)
    ax.set_xlabel("run (in time order)")
    ax.set_ylabel(_ylabel(s.identity))
    ax.set_title(f"series {s.id}", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return fig


def trend_page(s: SeriesView, ref: Any) -> str:
    """``ref(run) -> RunRef``: how a run of the series is named and linked from ``trends/``."""
    s_ctx = {"id": s.id, "points": s.points, "groups": s.groups, "changes": s.changes,
             "identity_items": s.identity_items,
             "change_rows": [{"run": ref(c.get("run")), "kind": c.get("kind"),
                              "ratio": "—" if c.get("ratio") is None else f"{float(c['ratio']):.3f}",
                              "text": change_text(c.get("ratio"))} for c in s.changes],
             "group_rows": [{"start": ref(g.get("start_run")), "end": ref(g.get("end_run")),
                             "mean": value_text(g.get("mean")), "stdev": value_text(g.get("stdev"))}
                            for g in s.groups],
             "point_rows": [{"run": ref(p.get("run")), "time": str(p.get("time") or "—"),
                             "value": value_text(p.get("value")), "status": str(p.get("status") or "ok"),
                             "noise": noise_text(p)} for p in s.points]}
    svg = figure_svg(trend_figure(s, lambda r: ref(r).label))
    title = str(s.raw.get("label") or s.identity_text or s.id)
    return render_page("trend.html.j2", f"Trend: {title}", 1, s=s_ctx, svg=svg)


def trends_index(series: list[SeriesView], notes: list[str]) -> str:
    return render_page("trends.html.j2", "Trends", 1, series=series, notes=notes)

"""Plots for the HTML report (matplotlib, Agg backend), returned as base64 PNG strings."""
from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from nfvperf import units  # noqa: E402
from nfvperf.report import ceiling as hc  # noqa: E402
from nfvperf.report.extract import latency_of, result, result_value, size_of  # noqa: E402
from nfvperf.report.rounds import is_rounds_test, studies as rounds_studies  # noqa: E402
from nfvperf.report.table import THROUGHPUT_METHODS, is_latency, is_loss_steps  # noqa: E402
from nfvperf.report.study import axis_text, is_log_axis
from nfvperf.report.extract import resolved_tests
from nfvperf.report.polling import MARK, mark_overlaps
from nfvperf.report.study import study_reports
from nfvperf.methods.capacity import METRIC_TITLES
from nfvperf.report.explain import result_trials


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _finish(ax: Any, xlabel: str, ylabel: str, title: str, which: str = "major", **legend: Any) -> None:
    """The axes' labels and title, a light grid and the legend (``legend``: its options)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which=which)
    ax.legend(**legend)


def ceiling_series(run: Any) -> dict[str, list[tuple[int, float, bool]]]:
    """The harness ceiling per port kind as (frame size, fps, only a lower bound) points, sorted
    by size (a lower bound: the nominal line rate passed, :func:`hc.is_lower_bound`)."""
    out: dict[str, list[tuple[int, float, bool]]] = {}
    for c in hc.ceilings_of(run.environment or {}):
        pts = sorted((int(s), float(p["fps"]), hc.is_lower_bound(p)) for s, p in (c.get("per_size") or {}).items()
                     if isinstance(p, dict) and p.get("fps") is not None)
        if pts:
            out.setdefault(str(c.get("port_kind") or "harness"), pts)
    return out


def throughput_figure(run: Any) -> Any:
    """The throughput-vs-size figure (measured series, theoretical max, harness ceiling), or None."""
    series: dict[str, list[tuple[float, float, dict]]] = {}
    for t in run.tests:
        if t.method in THROUGHPUT_METHODS and t.results and t.frame_size_b and not is_rounds_test(t):
            pps = result_value(t)
            if pps is not None:
                series.setdefault(t.name, []).append((t.frame_size_b, pps, t.traffic or {}))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    all_sizes: dict[float, dict] = {}
    for name, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] / 1e6 for p in pts], "o-", label=f"{name} (measured)")
        for s, _, prof in pts:
            all_sizes[s] = prof
    xs = sorted(all_sizes)
    lo, hi = min(xs), max(xs)
    grid = sorted(set(xs + [lo + (hi - lo) * i / 60 for i in range(61)]))
    prof = all_sizes[xs[0]]
    link = float(prof.get("link_speed_bps") or 10e9)
    extra = units.VXLAN_OVERHEAD_IPV4_B if prof.get("vxlan") else 0
    ax.plot(grid, [units.max_fps(s + extra, link) / 1e6 for s in grid], "--", color="grey",
            label=f"theoretical max ({link / 1e9:g} Gbit/s, L1)")
    for pkind, cpts in ceiling_series(run).items():
        low = [p for p in cpts if p[2]]
        at = ("; ≥ at " + ", ".join(f"{p[0]} B" for p in low) + ": line rate carried, a lower bound") if low else ""
        ax.plot([p[0] for p in cpts], [p[1] / 1e6 for p in cpts], "s:", color="tab:red",
                label=f"harness ceiling ({pkind}: tgen through testpmd io{at})", gid="harness-ceiling")
        if low:     # the harness's limit is above these points: an upward marker, not a limit
            ax.plot([p[0] for p in low], [p[1] / 1e6 for p in low], "^", color="tab:red", ms=10, ls="none",
                    label=f"harness ceiling ≥ ({pkind}: at least line rate, its limit not found)",
                    gid="harness-ceiling-lower-bound")
    _finish(ax, "Frame size (B, L2 incl. FCS)", "Throughput (Mfps per interface)",
            "Zero-loss throughput vs frame size (per interface)")
    return fig


def loss_vs_load(run: Any) -> Any:
    pts: dict[str, list[tuple[float, float]]] = {}
    for t in run.tests:
        if not t.trials or not (is_loss_steps(t.method) or t.method in THROUGHPUT_METHODS):
            continue
        prof = t.traffic or {}
        mx = units.max_fps(size_of(prof), float(prof.get("link_speed_bps") or 10e9))
        key = f"{t.name} {t.frame_size_b or 'IMIX'} B"
        for tr in t.trials:
            pts.setdefault(key, []).append((100 * tr.load_pps / mx, 100 * tr.loss_ratio))
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, p in list(pts.items())[:12]:
        p.sort()
        ax.plot([a for a, _ in p], [b for _, b in p], "o-" if "loss" in key else "o", ms=4, label=key, alpha=0.8)
    ax.set_xlim(0, 105)
    ax.set_ylim(bottom=0)
    _finish(ax, "Offered load (% of theoretical maximum, L1, per interface)", "Frame loss (%)",
            "Loss vs offered load (every trial)", fontsize=7, ncol=2)
    return fig


def loss_over_time(run: Any) -> Any:
    """Frames lost per interval inside the trial that located each result's loss (tgen's
    ``intervals``, 100 ms by default): a burst at the start (learning, a stalled host) or steady."""
    series = []
    for t in resolved_tests(run):
        made, above = result_trials(t)
        trial = above if above is not None else (made[len(made) // 2] if made else None)
        iv = ((trial or {}).get("telemetry") or {}).get("generator", {}).get("intervals")
        if trial is not None and isinstance(iv, dict) and iv.get("lost"):
            step = float(iv.get("interval_ms") or 100) / 1e3
            series.append((f"{t.name} {t.frame_size_b or 'IMIX'} B @ {trial['load_pps']:,.0f} fps",
                           [step * (i + 1) for i in range(len(iv["lost"]))], iv["lost"], iv.get("sent") or []))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, x, lost, sent in series[:8]:
        pct = [100.0 * lo / s if s else 0.0 for lo, s in zip(lost, sent)] if sent else lost
        ax.plot(x, pct, "o-", ms=3, label=label, alpha=0.8)
    ax.axhline(0, color="grey", lw=0.5)
    _finish(ax, "time since the traffic started (s; the drain follows the traffic)",
            "lost per interval (% of the frames sent in it)",
            "Loss over time (the trial that located each result's loss)", fontsize=7)
    return fig


def net_wanted(run: Any, net_of_harness: Optional[bool] = None) -> bool:
    """Latency plots net of the harness self-latency: as the report's tables
    (:func:`hc.latency_net_wanted`), and only for a run that has a self-latency."""
    return hc.latency_net_wanted(run.config, net_of_harness) and hc.has_self_latency(run.environment or {})


def _latencies(run: Any, net: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """(series label, latency point); with ``net`` each point net of the harness self-latency on
    its path, and labelled "(gross)" where there is none for its size."""
    env = run.environment or {}
    out = []

    def add(t: Any, label: str, lat: dict[str, Any]) -> None:
        lat, gross = hc.net_point(lat, env, t.frame_size_b, (t.topology or {}).get("port_kind") or None, net)
        out.append((label + " (gross)" if gross else label, lat))

    for t in run.tests:
        res = result(t) if is_latency(t.method) else None
        if res is not None:
            for lat in res.latency_points():
                if lat.get("count") or lat.get("avg_ns"):
                    frac = lat.get("fraction")
                    at = f" @{100 * frac:g}%" if isinstance(frac, (int, float)) else ""
                    add(t, f"{t.name} {t.frame_size_b or 'IMIX'} B{at}", lat)
    if not out:   # fall back to throughput results' latency
        for t in run.tests:
            if t.results:
                own = latency_of(t.results[-1].data or {})
                if own and own.get("percentiles_ns"):
                    add(t, f"{t.name} {t.frame_size_b or 'IMIX'} B", own)
    return out


def latency_percentiles_figure(run: Any, net_of_harness: Optional[bool] = None) -> Any:
    """Latency by percentile, one series per latency point: net of the harness self-latency
    when the report is (:func:`net_wanted`), else as measured.  None without percentiles."""
    net = net_wanted(run, net_of_harness)
    lats = [(k, lat) for k, lat in _latencies(run, net) if lat.get("percentiles_ns")]
    if not lats:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, lat in lats[:10]:
        pcs = []
        for k, v in (lat.get("percentiles_ns") or {}).items():
            try:
                p = float(k)
            except ValueError:
                continue
            if 0 <= p < 100 and v is not None:
                pcs.append((p, float(v)))
        if lat.get("max_ns") is not None:
            pcs.append((99.9999, float(lat["max_ns"])))
        pcs.sort()
        ax.plot([1 / (1 - p / 100) for p, _ in pcs], [v / 1e3 for _, v in pcs], "o-", ms=3, label=key)
    ax.set_xscale("log")
    ticks = [2, 10, 100, 1000, 10000, 1e6]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["50", "90", "99", "99.9", "99.99", "max"])
    ax.set_yscale("log")
    net_text = ", net of harness self-latency" if net else ""
    _finish(ax, "Percentile (%, log scale of 1/(1−p))", "Latency (µs)" + net_text,
            "Latency by percentile" + (" (net of harness self-latency)" if net else ""), "both", fontsize=7)
    return fig


#: the histogram's title suffix in a report net of the harness: its buckets are the generator's
HISTOGRAM_GROSS = " (gross: includes the harness self-latency)"


def latency_histogram_figure(run: Any, net_of_harness: Optional[bool] = None) -> Any:
    """The stored latency histograms as measured: its buckets are the generator's, and shifting
    them would not be a histogram of anything measured, so in a report net of the harness it is
    titled gross."""
    gross = net_wanted(run, net_of_harness)
    lats = [(k, lat) for k, lat in _latencies(run) if lat.get("histogram")]
    if not lats:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, lat in lats[:6]:
        hist = [(float(b), int(c)) for b, c in lat["histogram"] if c]
        if not hist:
            continue
        tot = sum(c for _, c in hist) or 1
        ax.step([b / 1e3 for b, _ in hist], [100 * c / tot for _, c in hist], where="pre", label=key)
    ax.set_xscale("log")
    _finish(ax, "Latency bucket upper bound (µs, log)", "Share of frames (%)",
            "Latency histogram" + (HISTOGRAM_GROSS if gross else ""), "both", fontsize=7)
    return fig


def _axis_value(v: Any) -> Any:
    """A named variant called "64" or "1000000" (a rules axis that also sets flows) plots as the
    number it names, so a rules or flows axis gets its log scale."""
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return v


def study_figure(rep: Any, metric: Any) -> Any:
    """``metric`` of one study along its axis (the pivot's row axis, else the first axis), one
    series per configuration of the other axes (and per frame size when there are several); log
    x for the flows and rules axes.  None when nothing is plottable."""
    axis = rep.row_axis or (rep.axes[0] if rep.axes else None)
    if axis is None:
        return None
    others = [a for a in rep.axes if a != axis]
    sizes = {p.size for p in rep.points}
    series: dict[str, list[tuple[Any, float]]] = {}
    shared: list[tuple[Any, float]] = []       # points whose DUT polled on the generator's CPU
    for p in rep.points:
        y = metric.fn(p)
        if y is None or axis not in p.axes:
            continue
        label = ", ".join(f"{a}={axis_text(p.axes.get(a))}" for a in others)
        if len(sizes) > 1:
            label = (label + ", " if label else "") + f"{p.size or 'IMIX'} B"
        series.setdefault(label or rep.name, []).append((_axis_value(p.axes[axis]), y))
        if (p.overlap or {}).get("cpus"):
            shared.append((_axis_value(p.axes[axis]), y))
    if not series:
        return None
    xs = list(dict.fromkeys(x for pts in series.values() for x, _ in pts))
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    scale, ylabel = (1e-6, "Mfps per interface") if metric.unit == "fps" else \
        (1.0, metric.title.split(",", 1)[-1].strip())
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, pts in series.items():
        if numeric:
            pts.sort(key=lambda q: q[0])
        ax.plot([x if numeric else xs.index(x) for x, _ in pts], [y * scale for _, y in pts], "o-", label=label)
    if shared:
        ax.scatter([x if numeric else xs.index(x) for x, _ in shared], [y * scale for _, y in shared],
                   marker="x", s=90, color="black", zorder=5, gid="generator-cpu-shared",
                   label=f"{MARK} DUT polling on the generator's CPU (two busy-pollers time-sliced: not the DUT)")
    log = numeric and is_log_axis(axis) and all(x > 0 for x in xs)
    if log:
        ax.set_xscale("log")
        ax.minorticks_off()
    ax.set_xticks(sorted(xs) if numeric else list(range(len(xs))))
    ax.set_xticklabels([axis_text(x) for x in (sorted(xs) if numeric else xs)])
    ax.set_ylim(bottom=0)
    _finish(ax, axis + (" (log scale)" if log else ""), ylabel, f"study {rep.name}: {metric.title}", "both",
            fontsize=8)
    return fig


def study_figures(run: Any, net_of_harness: Optional[bool] = None) -> Iterator[tuple[str, str, Any]]:
    """(title, file stem, figure) for every study of the run: its first metric (the one with the
    ratios: ``traffic.rate_unit`` for rate methods) and, when cores vary, Mpps per PMD core;
    latency net of the harness when the report is (:func:`net_wanted`).  Made one at a time: the
    caller saves and closes each figure before the next is drawn (a seed suite has 40+ studies)."""
    rate_unit = str(((run.config or {}).get("traffic") or {}).get("rate_unit") or "pps")
    net_env = (run.environment or {}) if net_wanted(run, net_of_harness) else None
    yield from rounds_figures(run)
    plain = [t for t in resolved_tests(run) if not is_rounds_test(t)]
    mark_overlaps(plain, run.environment or {})
    for rep in study_reports(plain, rate_unit, net_env):
        for pv in rep.pivots[:1] + [p for p in rep.pivots if p.metric.key == "per_core"]:
            fig = study_figure(rep, pv.metric)
            if fig is not None:
                stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"study-{rep.name}-{pv.metric.key}")
                yield (f"Study {rep.name}: {pv.metric.title}", stem, fig)


def rounds_figure(name: str, metric: str, units: list[Any]) -> Any:
    """An interleaved study's metric: each unit's median with its 95 % interval (left), each
    unit's paired ratio to the baseline with its interval, against 1.0 (right)."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    labels = [f"{u.label}" + (f" {u.size} B" if u.size and len({x.size for x in units}) > 1 else "") for u in units]
    xs = list(range(len(units)))
    for x, u in zip(xs, units):
        mm = u.metric(metric)
        iv = mm.get("interval") or {}
        med = mm.get("median_pps")
        if med is None:
            continue
        lo, hi = float(iv.get("lo", med)), float(iv.get("hi", med))
        ax.errorbar([x], [med / 1e6], yerr=[[(med - lo) / 1e6], [(hi - med) / 1e6]], fmt="o", capsize=6,
                    color="tab:blue" if not u.baseline else "black")
    ax.set_xticks(xs, labels, rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylabel("Mfps per interface (median of rounds)")
    ax.set_title(f"{METRIC_TITLES.get(metric, metric)}: median, 95 % interval", fontsize=9)
    ax.grid(True, alpha=0.3)
    for x, u in zip(xs, units):
        r = u.ratio(metric)
        if not r:
            if u.baseline:
                bx.plot([x], [1.0], "s", color="black")
            continue
        color = "tab:red" if r.get("differs") else "tab:grey"
        bx.errorbar([x], [r["median"]], yerr=[[r["median"] - r["lo"]], [r["hi"] - r["median"]]], fmt="o",
                    capsize=6, color=color)
    bx.axhline(1.0, color="black", lw=0.8, ls="--")
    bx.set_xticks(xs, labels, rotation=20, ha="right", fontsize=8)
    bx.set_xlim(-0.5, len(xs) - 0.5)
    bx.set_ylabel("× baseline (median of per-round ratios)")
    bx.set_title("paired ratio to the baseline, 95 % interval (grey: no difference measured)", fontsize=9)
    bx.grid(True, alpha=0.3)
    fig.suptitle(f"Study {name} in interleaved rounds", fontsize=10)
    fig.tight_layout()
    return fig


def rounds_figures(run: Any) -> Iterator[tuple[str, str, Any]]:
    """(title, file stem, figure) per interleaved study and metric."""
    for name, us in rounds_studies(list(run.tests)).items():
        metrics = list((us[0].summary.get("metrics") or {}).keys())
        for m in metrics:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"rounds-{name}-{m}")
            yield (f"Study {name}: {m} over interleaved rounds, paired ratios", stem,
                   rounds_figure(name, m, us))


def plots_dir(run: Any, html_path: Optional[Path] = None) -> Path:
    """Where a run's plot files go: ``<run dir>/report`` when the run directory exists here, else
    ``<html name>-plots`` beside the HTML file (or ``./nfv<uid>-plots``)."""
    rd = Path(run.run_dir) if getattr(run, "run_dir", None) else None
    if rd is not None and rd.is_dir():
        return rd / "report"
    if html_path is not None:
        return Path(html_path).with_name(Path(html_path).stem + "-plots")
    return Path(f"{run.tag}-plots")


def write_plot_files(run: Any, directory: Path, net_of_harness: Optional[bool] = None) -> list[Path]:
    """Every study plot and the throughput-vs-size plot as PNG and SVG files in ``directory``
    (study latency net of the harness as the report: ``net_of_harness``)."""
    def figs() -> Iterator[tuple[str, Any]]:
        yield from ((stem, fig) for _, stem, fig in study_figures(run, net_of_harness))
        tvs = throughput_figure(run)
        if tvs is not None:
            yield ("throughput-vs-frame-size", tvs)
    out: list[Path] = []
    directory = Path(directory)
    for stem, fig in figs():      # one figure open at a time
        directory.mkdir(parents=True, exist_ok=True)
        # the tight box is laid out once for both formats ("tight" would lay the figure out per format)
        fig.draw_without_rendering()
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
        for ext in ("png", "svg"):
            p = directory / f"{stem}.{ext}"
            fig.savefig(p, format=ext, dpi=100, bbox_inches=box)
            out.append(p)
        plt.close(fig)
    return out


def all_plots(run: Any, net_of_harness: Optional[bool] = None) -> list[tuple[str, str]]:
    """(title, base64 PNG) of every plot of the HTML report; latency net of the harness self-latency
    as the report's tables (``net_of_harness``, else the suite's option), the histogram titled gross."""
    out = []
    try:
        out += [(title, _png(fig)) for title, _, fig in study_figures(run, net_of_harness)]
    except Exception:  # noqa: BLE001 - a plot must not take the report down (as below)
        pass
    net = net_wanted(run, net_of_harness)
    plots: list[tuple[str, Callable[[Any], Any]]] = [
        ("Throughput vs frame size", throughput_figure), ("Loss vs load", loss_vs_load),
        ("Loss over time", loss_over_time),
        ("Latency percentiles" + (" (net of harness self-latency)" if net else ""),
         lambda r: latency_percentiles_figure(r, net)),
        ("Latency histogram" + (HISTOGRAM_GROSS if net else ""), lambda r: latency_histogram_figure(r, net))]
    for title, fn in plots:     # each a figure or None
        try:
            fig = fn(run)
            png = None if fig is None else _png(fig)
        except Exception as e:  # noqa: BLE001 - a plot must not take the report down
            png = None
            title = f"{title} (failed: {e})"
        if png:
            out.append((title, png))
    return out

"""A comparison page: :func:`nfvperf.report.compare.compare_many` of two runs (the previous run
of the same suite at the same place, then this one) as an HTML table with the same columns and
verdicts as ``nfvperf compare``."""
from __future__ import annotations

from typing import Any

from nfvperf.report.compare import DEFAULT_THRESHOLD, _bound_cell, _f, compare_many, shows_bound, verdict
from nfvperf.report.study import ratio_text
from nfvperf.site.render import render_page


def compare_rows(cmp: Any) -> list[dict[str, Any]]:
    rows = []
    for r in cmp.rows:
        ratio = r.ratios[1]
        cls = ("changed-progression" if (ratio or 0) > 1 else "changed-regression") if r.flagged[1] else ""
        rows.append({"test": r.test, "size": str(r.frame_size_b or "IMIX"), "metric": r.metric,
                     "vals": [_f(v) for v in r.values], "ratio": ratio_text(ratio),
                     "delta": "—" if ratio is None else f"{100 * (ratio - 1):+.2f}",
                     "noise": f"{100 * r.thresholds[1]:.2f}", "bound": _bound_cell(r),
                     "verdict": verdict(r, 2), "verdict_class": cls})
    return rows


def compare_page(a: Any, b: Any) -> str:
    cmp = compare_many([a, b], threshold=DEFAULT_THRESHOLD)
    missing = [(label, ", ".join(f"#{i + 1}" for i in range(2) if i + 1 not in lacking))
               for label, lacking in cmp.missing]
    return render_page("compare.html.j2", f"Run {b.id} compared with run {a.id} ({a.suite})", 1, cmp=cmp,
                       rows=compare_rows(cmp), show_bound=shows_bound(cmp), missing=missing,
                       flagged=len(cmp.flagged), threshold=f"{100 * DEFAULT_THRESHOLD:g}")

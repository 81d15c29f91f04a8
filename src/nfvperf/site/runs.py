"""A run's pages: its report (the HTML report of :mod:`nfvperf.report.html`, unchanged but for a
navigation line) and, for a run with studies, its study page (the report's study pivots and the
study plots as inline SVG)."""
from __future__ import annotations

from typing import Any

from markupsafe import escape

from nfvperf.report.html import render_html
from nfvperf.report.plots import study_figures
from nfvperf.report.tables import build
from nfvperf.site.catalog import RunRow
from nfvperf.site.render import render_page
from nfvperf.site.svg import figure_svg

#: the report tables that belong on a study page (report.study and report.rounds keys)
STUDY_KEYS = ("vxlan_overhead", "switching_across")


def is_study_table(key: str) -> bool:
    return key.startswith("study_") or key.startswith("rounds:") or key in STUDY_KEYS


def _nav(row: RunRow) -> str:
    links = ['<a href="../index.html">Runs</a>', '<a href="../trends/index.html">Trends</a>']
    if row.studies:
        links.append(f'<a href="../studies/{row.id}.html">Studies of this run</a>')
    if row.previous:
        links.append(f'<a href="../compare/{row.previous}-{row.id}.html">Compared with run {row.previous}</a>')
    state = ""
    if row.status in ("running", "aborted"):
        state = (f' <b class="status status-{escape(row.status)}">this run is {escape(row.status_text)}'
                 + (f": {escape(row.dead)}" if row.dead else "") + "</b>")
    return ('<nav class="site-nav" style="font-size:.9em">' + " · ".join(links) + state + "</nav>")


def run_page(run: Any, row: RunRow) -> str:
    """The run's HTML report with the site's navigation after ``<body>`` and an empty icon (no
    favicon request: no 404 on a web server)."""
    html = render_html(run)
    html = html.replace("<head>", '<head><link rel="icon" href="data:,">', 1)
    return html.replace("<body>", "<body>\n" + _nav(row), 1)


def study_page(run: Any, row: RunRow) -> str:
    tables = [t for t in build(run).tables if is_study_table(t.key)]
    plots = [(title, figure_svg(fig)) for title, _stem, fig in study_figures(run)]
    return render_page("study.html.j2", f"Studies of run {run.id} ({run.tag})", 1, run=run,
                       studies=row.studies, tables=tables, plots=plots)

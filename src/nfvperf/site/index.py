"""The site's front page: every run in one table (newest first) with its links, filterable in
the page by suite, host or testbed, DUT, status and date (assets/site.js)."""
from __future__ import annotations

from nfvperf.site.catalog import RunRow
from nfvperf.site.render import render_page


def index_page(rows: list[RunRow]) -> str:
    newest = sorted(rows, key=lambda r: r.id, reverse=True)
    filters = [("suite", "Suite", sorted({r.suite for r in rows})),
               ("where", "Host / testbed", sorted({r.where for r in rows})),
               ("dut", "DUT", sorted({r.dut for r in rows})),
               ("status", "Status", sorted({r.status for r in rows}))]
    return render_page("index.html.j2", "nfvperf results", 0, runs=newest, filters=filters)

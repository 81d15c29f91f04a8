"""The report as Markdown (GitHub tables): the same header, notes and tables as the terminal and
HTML reports, for pasting into an issue, a README or a review."""
from __future__ import annotations

from typing import Any, Optional

from nfvperf.report.table import Table
from nfvperf.report.tables import ReportData, build


def _cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def table_markdown(t: Table) -> str:
    lines = [f"### {_cell(t.title)}", ""]
    if t.note:
        lines += [_cell(t.note), ""]
    lines.append("| " + " | ".join(_cell(c) for c in t.columns) + " |")
    lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(t.columns))) + "|")
    for row in t.rows or [["(no data)"] + [""] * (len(t.columns) - 1)]:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def data_markdown(data: ReportData) -> str:
    run = data.run
    out = [f"# nfvperf report — run {run.id} ({run.tag})", "", "| | |", "|---|---|"]
    out += [f"| **{_cell(k)}** | {_cell(v)} |" for k, v in data.header]
    out.append("")
    out += [f"> Note: {_cell(n)}\n" for n in data.notes]
    out += [table_markdown(t) for t in data.tables]
    return "\n".join(out)


def render_markdown(run: Any, net_of_harness: Optional[bool] = None) -> str:
    return data_markdown(build(run, net_of_harness=net_of_harness))

"""The report on the terminal (rich tables)."""
from __future__ import annotations

import sys
from typing import Any, Optional

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from nfvperf.report.tables import SKIPPED_KEY, ReportData, build


def console_for(stream: Any = None) -> Console:
    stream = stream or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=stream, width=None if tty else 240, highlight=False, soft_wrap=False)


def render(data: ReportData, console: Optional[Console] = None) -> None:
    con = console or console_for()
    head = RichTable(show_header=False, box=None, pad_edge=False)
    head.add_column(style="bold")
    head.add_column()
    for k, v in data.header:
        head.add_row(escape(k), escape(v))
    con.print(f"[bold]nfvperf report — run {data.run.id} ({escape(data.run.tag)})[/bold]")
    con.print(head)
    for n in data.notes:
        con.print(f"Note: {n}", markup=False)
    for t in data.tables:
        rt = RichTable(title=escape(t.title), caption=escape(t.note) if t.note else None,
                       caption_justify="left", title_justify="left")
        for i, c in enumerate(t.columns):
            first_label = i == 0 and not t.key.startswith(("throughput", "latency"))
            text = t.key == SKIPPED_KEY and c != "Units"       # reasons and unit lists read left
            rt.add_column(escape(c), justify="left" if first_label or text else "right")
        for row in t.rows:
            rt.add_row(*(escape(str(c)) for c in row))
        if not t.rows:
            rt.add_row(*(["(no data)"] + [""] * (len(t.columns) - 1)))
        con.print()
        con.print(rt)


def print_report(run: Any, stream: Any = None, net_of_harness: Optional[bool] = None) -> ReportData:
    data = build(run, net_of_harness=net_of_harness)
    render(data, console_for(stream))
    return data

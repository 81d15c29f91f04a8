"""``nfvperf site DIR``: build or update the static site from the store.

Pages (all relative links; see docs/site.md):

* ``index.html``: every run, filterable; ``assets/``: its stylesheet and filter script;
* ``runs/<id>.html``: the run's HTML report; ``studies/<id>.html``: its study pivots and plots;
* ``compare/<prev>-<id>.html``: the run against the previous run of its suite at the same place;
* ``trends/index.html`` and ``trends/<series>.html``: the trend series, groups and changes.

Incremental: every page's inputs are hashed (:mod:`nfvperf.site.manifest`); a page whose hash is
unchanged and whose file exists is not rendered again.  A run is loaded (with its trials) only
when one of its pages must be written, one or two runs at a time: no step holds every trial.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from nfvperf.site.catalog import RunRow, run_rows
from nfvperf.site.index import index_page
from nfvperf.site.manifest import BuildReport, Manifest, input_hash
from nfvperf.site.render import ASSET_FILES, asset_text
from nfvperf.trend import trend_json
from nfvperf.site.compare import compare_page
from nfvperf.site.runs import run_page, study_page
from nfvperf.site.trends import series_views
from nfvperf.site.trends import RunRef, trend_page, trends_index

# the report pages, comparisons and trends (matplotlib, the report's tables, the trend) are
# imported where a page of theirs is written: an index-only build reads the run rows only

#: what a build can be asked to (re)build; the directory each part owns
PARTS = {"index": "index.html", "runs": "runs/", "studies": "studies/", "compare": "compare/",
         "trends": "trends/"}

TrendFn = Callable[..., dict]


def build_site(store: Any, out: Path, parts: Iterable[str] = tuple(PARTS), trend: Optional[TrendFn] = None,
               selector: Any = None, log: Optional[Callable[[str], None]] = None) -> BuildReport:
    """Build (or update) the site in ``out`` from ``store``; returns what was written.

    ``parts``: a subset of :data:`PARTS` (pages of other parts are left as they are);
    ``trend``: the trend function (default :func:`nfvperf.trend.trend_json`); ``selector``: passed on to it."""
    parts = tuple(parts)
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise ValueError(f"site parts: unknown {', '.join(bad)}; choose from {', '.join(PARTS)}")
    say = log or (lambda _m: None)
    out = Path(out)
    man = Manifest(out)
    for name in ASSET_FILES:
        text = asset_text(name)
        man.page(f"assets/{name}", input_hash("asset", name, text), lambda text=text: text)
    rows = run_rows(store)
    by_id = {r.id: r for r in rows}
    if {"runs", "studies", "compare"} & set(parts):
        for n, row in enumerate(rows, 1):
            _run_pages(store, man, row, by_id, parts)
            if n % 100 == 0:
                say(f"site: {n}/{len(rows)} runs checked, {len(man.report.written)} page(s) written")
    notes: list[str] = []
    if "trends" in parts:                  # the index does not need them: it links trends/index.html
        views = _series(store, trend, selector, notes)
        _trend_pages(man, views, rows, notes)
    if "index" in parts:
        man.page("index.html", input_hash("index", [r.fingerprint for r in rows], [r.previous for r in rows]),
                 lambda: index_page(rows))
    man.report.notes += notes
    return man.finish(lambda rel: rel.startswith("assets/") or any(
        rel == PARTS[p] or (PARTS[p].endswith("/") and rel.startswith(PARTS[p])) for p in parts))


def _run_pages(store: Any, man: Manifest, row: RunRow, by_id: dict[int, RunRow], parts: tuple[str, ...]) -> None:
    """The run's report, study and comparison pages that are not fresh; the run (and the one it
    is compared with) loaded only then."""
    todo: list[tuple[str, str, Callable[[Any], str]]] = []
    if "runs" in parts:
        todo.append((f"runs/{row.id}.html", input_hash("run", row.fingerprint, row.previous),
                     lambda run: run_page(run, row)))
    if "studies" in parts and row.studies:
        todo.append((f"studies/{row.id}.html", input_hash("study", row.fingerprint),
                     lambda run: study_page(run, row)))
    prev = by_id.get(row.previous) if row.previous else None
    if "compare" in parts and prev is not None:
        todo.append((f"compare/{prev.id}-{row.id}.html", input_hash("compare", prev.fingerprint, row.fingerprint),
                     lambda run: compare_page(store.load_run(prev.id), run)))
    stale = [(rel, digest, fn) for rel, digest, fn in todo if not man.fresh(rel, digest)]
    if not stale:
        return
    run = store.load_run(row.id)
    for rel, digest, fn in stale:
        man.write_page(rel, digest, fn(run))


def _series(store: Any, trend: Optional[TrendFn], selector: Any, notes: list[str]) -> list[Any]:
    fn = trend or trend_json
    try:
        doc = fn(store, selector) if selector is not None else fn(store)
    except Exception as e:  # noqa: BLE001 - the rest of the site is still worth writing
        notes.append(f"No trend pages: computing the trend failed: {type(e).__name__}: {e}")
        return []
    return series_views(doc if isinstance(doc, dict) else {})


def _trend_pages(man: Manifest, views: list[Any], rows: list[RunRow], notes: list[str]) -> None:
    refs: dict[str, int] = {}
    for r in rows:
        refs.update({str(r.id): r.id, r.uid: r.id, r.tag: r.id})

    def ref(run: Any) -> RunRef:
        rid = refs.get(str(run))
        return RunRef(label=str(rid if rid is not None else run), href=f"../runs/{rid}.html" if rid else None)

    for s in views:
        links = sorted({str(p.get("run")): ref(p.get("run")).href or "" for p in s.points}.items())
        man.page(f"trends/{s.file}", input_hash("trend", s.raw, links), lambda s=s: trend_page(s, ref))
    man.page("trends/index.html", input_hash("trends", [v.raw for v in views], notes),
             lambda: trends_index(views, notes))

#!/usr/bin/env python3
"""Benchmark: the results store at scale (issue 17 item 5): 10,000 runs and 1,000,000 trials on
SQLite and on PostgreSQL, and how long the commands that read it take, with their peak memory.

The store is seeded from real runs on the simulated DUT (``nfvperf run suites/quick.yaml`` and
``suites/sim-tour.yaml`` with ``--tg sim --quick``: 59 and 246 trials), then filled with copies
of them bulk-inserted with SQLAlchemy Core: each copy gets a new id, uid and start time (10
minutes apart), one of four host names, and its rates (results, trial loads) scaled by a level
and 1 % noise (host bench-h0 drops 10 % for its last 30 % of runs: a regression for the trend
to find).  The mix of the two seeds is chosen so the trials add up to the target; every 500th
copy is aborted and the newest is still running.

Timed, each as its own process (``nfvperf ...`` through the CLI; wall time and the child's peak
RSS from ``wait4``), on each back end:

* ``history`` (the default 30 newest runs) and ``history --json --limit RUNS`` (every run);
* ``compare -2 latest``; ``trend --json`` for one series (a selector naming one configuration:
  suite, test, frame size, host), which is ``trend_json`` with a selector;
* the site index: ``site DIR --only index`` written first, then rebuilt after one more run is
  added, then rebuilt with nothing changed; the trend pages of every series (``--only trends``);
* ``nfvperf --version`` (interpreter and import start-up, included in every figure above).

Peak RSS is the child's ``VmHWM`` (read from /proc while it runs); CPU seconds are the child's
user + system time (``wait4``), which other work on the machine does not inflate as it does the
wall time; the site's own build time (``seconds`` of ``nfvperf site --json``) is shown too.

Prints a table and, as its LAST line, one JSON object.  ``make test`` runs it with ``--quick``
(20 runs, ~3,000 trials: every step, the site's trend pages on the first back end only).  The stores take ~3 GB each; the PostgreSQL
cluster runs as ``nobody`` on a Unix socket with fsync off (the writes are not what is measured),
in a directory of its own that ``nobody`` owns (the work directory is root's, mode 0700: initdb
cannot reach it).  Needs the postgresql package for the PostgreSQL part (skipped, and said so in
the JSON, without it); a cluster that is installed but does not start fails the bench.

    PYTHONPATH=src python3 bench/store_scale.py [--runs 10000] [--trials 1000000] [--quick]
        [--backends sqlite,postgresql] [--workdir DIR (kept; a store already filled is reused)]

JSON keys: runs, trials_target, backends, note
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sqlalchemy import func, insert, select, text  # noqa: E402

from nfvperf.store import Store  # noqa: E402
from nfvperf.store.db import run_to_dict  # noqa: E402
from nfvperf.store.models import Result, Run, Test, Trial  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           COLUMNS="200")
SEEDS = ("suites/quick.yaml", "suites/sim-tour.yaml")
HOSTS = 4
BATCH_RUNS = 100
BASE_TIME = dt.datetime(2025, 1, 1)


# --------------------------------------------------------------------------- seeding

def nfv(*args: str, timeout: float = 600) -> str:
    p = subprocess.run([sys.executable, "-m", "nfvperf", *args], capture_output=True, text=True, cwd=ROOT,
                       env=ENV, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"nfvperf {' '.join(args)}: rc={p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def seed_runs(work: Path) -> list[dict[str, Any]]:
    """The seed suites run for real on the sim, as exports (run, tests, trials, results)."""
    db = work / "seed.db"
    if not db.exists():
        for suite in SEEDS:
            nfv("run", suite, "--tg", "sim", "--quick", "--db", str(db), "--out", str(work / "seed-out"),
                "--no-progress")
    store = Store(str(db))
    try:
        return [run_to_dict(store.load_run(i + 1)) for i in range(len(SEEDS))]
    finally:
        store.close()


def trials_of(seed: dict[str, Any]) -> int:
    return sum(len(t["trials"]) for t in seed["tests"])


def mix(seeds: list[dict[str, Any]], runs: int, trials: int) -> list[int]:
    """Which seed each copy is: the small seed, and the big one often enough that the trials add
    up to ``trials`` (as near as whole runs allow)."""
    small, big = sorted(range(len(seeds)), key=lambda i: trials_of(seeds[i]))[::len(seeds) - 1]
    ts, tb = trials_of(seeds[small]), trials_of(seeds[big])
    n_big = min(runs, max(0, round((trials - runs * ts) / max(tb - ts, 1))))
    rng = random.Random(17)
    order = [big] * n_big + [small] * (runs - n_big)
    rng.shuffle(order)
    return order


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def scaled(obj: Any, f: float) -> Any:
    """``obj`` with its rates multiplied by ``f``: numbers (or lists of numbers) under a key ending
    in ``_pps``, and an interleaved unit's median interval (``interval``: median, lo, hi)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k.endswith("_pps") and _number(v):
                out[k] = v * f
            elif k.endswith("_pps") and isinstance(v, list) and all(_number(x) for x in v):
                out[k] = [x * f for x in v]
            elif k == "interval" and isinstance(v, dict):
                out[k] = {a: (x * f if a in ("median", "lo", "hi") and _number(x) else x) for a, x in v.items()}
            else:
                out[k] = scaled(v, f)
        return out
    if isinstance(obj, list):
        return [scaled(v, f) for v in obj]
    return obj


class Generator:
    """Bulk copies of the seed runs into a store, with explicit ids (fresh store)."""

    def __init__(self, store: Store, seeds: list[dict[str, Any]], total_runs: int):
        self.store, self.seeds, self.total = store, seeds, total_runs
        self.rng = random.Random(7)
        with store.session() as s:
            self.next = {m: (s.scalar(select(func.max(m.id))) or 0) + 1 for m in (Run, Test, Trial, Result)}
            self.runs_done = s.scalar(select(func.count(Run.id))) or 0

    def factors(self, i: int, host: int) -> tuple[float, float]:
        """(level, level × 1 % noise) of copy ``i``: the noise goes on results whose own spread
        covers it (searches, whose width is their noise); a unit of an interleaved study gets the
        level only (its rounds are copies of one another: their interval claims no noise)."""
        level = 0.9 if host == 0 and i >= 0.7 * self.total else 1.0
        return level, level * self.rng.gauss(1.0, 0.01)

    def add(self, order: list[int]) -> None:
        """Insert one copy per entry of ``order`` (a seed index), in batches."""
        for start in range(0, len(order), BATCH_RUNS):
            rows: dict[Any, list[dict[str, Any]]] = {Run: [], Test: [], Result: [], Trial: []}
            for k in order[start:start + BATCH_RUNS]:
                self._copy(self.seeds[k], rows)
            with self.store.engine.begin() as conn:
                for model in (Run, Test, Result, Trial):
                    if rows[model]:
                        conn.execute(insert(model.__table__), rows[model])
            done = self.runs_done
            if done % 1000 < BATCH_RUNS or start + BATCH_RUNS >= len(order):
                print(f"  {done:,} runs, {self.next[Trial] - 1:,} trials", flush=True)

    def _copy(self, seed: dict[str, Any], rows: dict[Any, list[dict[str, Any]]]) -> None:
        i = self.runs_done
        self.runs_done += 1
        host = i % HOSTS
        level, noisy = self.factors(i, host)
        r = seed["run"]
        rid = self._id(Run)
        start = BASE_TIME + dt.timedelta(minutes=10 * i)
        status = "running" if i == self.total - 1 else "aborted" if i % 500 == 499 else "completed"
        env = dict(r["environment"] or {}, hostname=f"bench-h{host}")
        env.pop("pid", None)
        rows[Run].append(dict(id=rid, uid=f"{i:06x}", tag=f"nfv{i:06x}", suite=r["suite"], suite_path=None,
                              topology=r["topology"], dut=r["dut"], tg=r["tg"], profile=r["profile"],
                              status=status, reason="bench: marked aborted" if status == "aborted" else None,
                              started_at=start, finished_at=None if status == "running" else
                              start + dt.timedelta(minutes=2), run_dir=None, config=r["config"],
                              environment=env, headline=r["headline"], testbed=None, schema_version=2))
        for t in seed["tests"]:
            f = level if (t.get("study") or {}).get("rounds") else noisy
            tid = self._id(Test)
            rows[Test].append(dict(id=tid, run_id=rid, name=t["name"], method=t["method"],
                                   frame_size_b=t["frame_size_b"], status=t["status"], reason=t["reason"],
                                   started_at=start, finished_at=start + dt.timedelta(minutes=1),
                                   params=t["params"], traffic=t["traffic"], topology=t["topology"],
                                   study=t["study"]))
            for res in t["results"]:
                v = res["value_pps"]
                rows[Result].append(dict(id=self._id(Result), test_id=tid, kind=res["kind"],
                                         value_pps=None if v is None else v * f, data=scaled(res["data"], f)))
            for tr in t["trials"]:
                detail = dict(tr["detail"])
                if isinstance(detail.get("load_pps"), (int, float)):
                    detail["load_pps"] = detail["load_pps"] * f
                rows[Trial].append(dict(id=self._id(Trial), test_id=tid, seq=tr["seq"],
                                        at=start + dt.timedelta(seconds=tr["seq"]), duration_s=tr["duration_s"],
                                        load_pps=tr["load_pps"] * f, sent=int(tr["sent"] * f),
                                        received=int(tr["received"] * f), loss_ratio=tr["loss_ratio"],
                                        valid=tr["valid"], context=tr["context"], detail=detail))

    def _id(self, model: Any) -> int:
        self.next[model] += 1
        return self.next[model] - 1

    def fix_sequences(self) -> None:
        """PostgreSQL: move the id sequences past the explicit ids (later inserts use them)."""
        if self.store.engine.dialect.name != "postgresql":
            return
        with self.store.engine.begin() as conn:
            for table in ("runs", "tests", "trials", "results"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                                  f"(SELECT COALESCE(MAX(id), 1) FROM {table}))"))


def fill(url: str, seeds: list[dict[str, Any]], runs: int, trials: int) -> dict[str, Any]:
    store = Store(url)
    try:
        gen = Generator(store, seeds, runs)
        t0 = time.perf_counter()
        if gen.runs_done == 0:
            gen.add(mix(seeds, runs, trials))
            gen.fix_sequences()
        elif gen.runs_done < runs:
            raise SystemExit(f"{url}: holds {gen.runs_done} runs, not {runs}: remove it or use another --workdir")
        with store.session() as s:
            counts = {m.__tablename__: s.scalar(select(func.count(m.id))) for m in (Run, Test, Trial, Result)}
        return dict(counts, fill_s=round(time.perf_counter() - t0, 1))
    finally:
        store.close()


def add_one_run(url: str, seeds: list[dict[str, Any]], runs: int) -> None:
    store = Store(url)
    try:
        gen = Generator(store, seeds, runs + 1)
        gen.add([0])
        gen.fix_sequences()
    finally:
        store.close()


# --------------------------------------------------------------------------- PostgreSQL

def pg_binary(name: str) -> Optional[str]:
    found = shutil.which(name)
    if found:
        return found
    cands = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0, reverse=True)
    return str(cands[0]) if cands else None


class PgCluster:
    """A throw-away cluster in ``base`` (kept across bench runs with --workdir), Unix socket only.
    As root, ``base`` is given to ``nobody``, who runs the server: it must be reachable by
    ``nobody`` (:meth:`start` checks, and names the directory when it is not)."""

    def __init__(self, base: Path):
        self.base, self.data = base, base / "pgdata"
        self.initdb, self.pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
        self.prefix = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        self.port = 0

    def missing(self) -> Optional[str]:
        if not self.initdb or not self.pg_ctl:
            return "PostgreSQL server binaries (initdb, pg_ctl) not found (apt-get install postgresql)"
        if os.geteuid() == 0 and not shutil.which("runuser"):
            return "root without runuser: cannot run postgres unprivileged"
        return None

    def start(self) -> str:
        assert self.initdb and self.pg_ctl
        self.base.mkdir(parents=True, exist_ok=True)
        if self.prefix:
            shutil.chown(self.base, user="nobody")
            if subprocess.run(self.prefix + ["test", "-w", str(self.base)]).returncode != 0:
                raise SystemExit(f"PostgreSQL: {self.base} is not reachable by the user nobody, who runs the "
                                 "server: give --workdir a directory whose parents others may enter (mode o+x)")
        if not self.data.exists():
            p = subprocess.run(self.prefix + [self.initdb, "-D", str(self.data), "-A", "trust", "-U", "nfvperf",
                                              "--no-sync", "-E", "UTF8"], capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                raise SystemExit(f"PostgreSQL: initdb -D {self.data} failed (rc {p.returncode}): {p.stderr[-1500:]}")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        subprocess.run(self.prefix + [self.pg_ctl, "-D", str(self.data), "-l", str(self.base / "log"), "-w", "-t",
                                      "120", "-o", f"-k {self.base} -p {self.port} -c listen_addresses= "
                                      "-c fsync=off -c synchronous_commit=off", "start"],
                       check=True, capture_output=True, timeout=180)
        return f"postgresql+psycopg://nfvperf@/postgres?host={self.base}&port={self.port}"

    def stop(self) -> None:
        if self.pg_ctl and self.data.exists():
            subprocess.run(self.prefix + [self.pg_ctl, "-D", str(self.data), "-m", "fast", "stop"],
                           capture_output=True, timeout=120)


# --------------------------------------------------------------------------- measuring

def _watch_hwm(pid: int, peak: list[int]) -> None:
    """The child's peak RSS: ``VmHWM`` of /proc/PID/status (kB), read every 20 ms until it exits.
    Not ``wait4``'s ru_maxrss: Linux starts a child's maxrss at its parent's RSS (fork copies
    the high-water mark), so every child would show at least this bench's own size."""
    status = Path(f"/proc/{pid}/status")
    while True:
        try:
            text_ = status.read_text()
        except OSError:
            return
        hwm = [ln for ln in text_.splitlines() if ln.startswith("VmHWM:")]
        if not hwm:                     # a zombie: it has exited
            return
        peak[0] = max(peak[0], int(hwm[0].split()[1]))
        time.sleep(0.02)


def timed(args: list[str], timeout: float = 1800) -> dict[str, Any]:
    """``nfvperf ARGS`` as a child: wall seconds, its peak RSS (MiB, :func:`_watch_hwm`), rc, stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "nfvperf", *args], stdout=out, stderr=err, cwd=ROOT, env=ENV)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        peak = [0]
        poller = threading.Thread(target=_watch_hwm, args=(p.pid, peak), daemon=True)
        poller.start()
        _pid, status, ru = os.wait4(p.pid, 0)
        timer.cancel()
        poller.join()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    res = {"s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "rss_mib": round(peak[0] / 1024, 1),
           "rc": p.returncode}
    if p.returncode != 0:
        res["error"] = (stderr or stdout)[-400:]
    res["stdout"] = stdout
    return res


def measure(url: str, work: Path, seeds: list[dict[str, Any]], runs: int, trend_pages: bool = True) -> dict[str, Any]:
    site = work / f"site-{url.split(':')[0].split('+')[0]}"
    shutil.rmtree(site, ignore_errors=True)
    m: dict[str, Any] = {}
    m["startup"] = timed(["--version"])
    m["history"] = timed(["history", "--db", url])
    m["history_all_json"] = timed(["history", "--db", url, "--json", "--limit", str(runs + 10)])
    m["compare"] = timed(["compare", "-2", "latest", "--db", url])
    sel = ["--suite", "sim-tour", "--test", "throughput", "--size", "64", "--host", "bench-h0"]
    m["trend_one_series"] = timed(["trend", "--json", "--db", url, *sel])
    m["site_index_first"] = timed(["site", str(site), "--only", "index", "--db", url, "--json"])
    add_one_run(url, seeds, runs)
    m["site_index_after_one_run"] = timed(["site", str(site), "--only", "index", "--db", url, "--json"])
    m["site_index_unchanged"] = timed(["site", str(site), "--only", "index", "--db", url, "--json"])
    if trend_pages:         # --quick: on the first back end only (CPU-heavy, the same code on both)
        m["site_trend_pages_all_series"] = timed(["site", str(site), "--only", "trends", "--db", url, "--json"])
    _check(m, runs)
    for v in m.values():
        v.pop("stdout", None)
    return m


def _check(m: dict[str, Any], runs: int) -> None:
    """What each command printed is what was asked: fails the bench, not only the numbers."""
    if m["history_all_json"]["rc"] == 0:
        m["history_all_json"]["listed"] = len(json.loads(m["history_all_json"]["stdout"]))
    if m["trend_one_series"]["rc"] == 0:
        doc = json.loads(m["trend_one_series"]["stdout"])
        m["trend_one_series"]["series"] = len(doc["series"])
        m["trend_one_series"]["points"] = sum(len(s["points"]) for s in doc["series"])
        m["trend_one_series"]["changes"] = [(c["run"], c["kind"], round(c["ratio"], 3))
                                            for s in doc["series"] for c in s["changes"]]
    for k in ("site_index_first", "site_index_after_one_run", "site_index_unchanged", "site_trend_pages_all_series"):
        if k in m and m[k]["rc"] == 0:
            rep = json.loads(m[k]["stdout"])
            m[k]["written"] = len(rep["written"])
            m[k]["build_s"] = rep.get("seconds")


ROWS = [("startup", "nfvperf --version (start-up, in every row)"), ("history", "history (30 newest)"),
        ("history_all_json", "history --json, every run"), ("compare", "compare -2 latest"),
        ("trend_one_series", "trend --json, one series (selector)"), ("site_index_first", "site index, first"),
        ("site_index_after_one_run", "site index after one more run"),
        ("site_index_unchanged", "site index, nothing changed"),
        ("site_trend_pages_all_series", "site trend pages, every series")]


def table(results: dict[str, Any]) -> None:
    """Wall s (CPU s of the process) and peak RSS per command and back end; for the site, the
    build's own seconds (without start-up) in brackets."""
    backends = [b for b in results if "measured" in results[b]]
    print(f"\n{'':40}" + "".join(f"{b + ': wall (cpu) s, RSS':>38}" for b in backends))
    for key, title in ROWS:
        cells = []
        for b in backends:
            if key not in results[b]["measured"]:
                cells.append("—")
                continue
            r = results[b]["measured"][key]
            build = f" [{r['build_s']:.2f}]" if r.get("build_s") is not None else ""
            cells.append(f"{r['s']:>7.2f} ({r['cpu_s']:>6.2f}){build} {r['rss_mib']:>5.0f} MiB"
                         + (" FAIL" if r["rc"] else ""))
        print(f"{title:40}" + "".join(f"{c:>38}" for c in cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--trials", type=int, default=1000000)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--workdir", help="keep the seed, the stores and the sites here (reused when filled)")
    ap.add_argument("--quick", action="store_true", help="20 runs, ~3,000 trials: seconds, for make test")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.trials = 20, 3000
        ENV["NFVPERF_STEADINESS_S"] = "0.1"     # the seed runs' CPU steadiness probes: not measured here
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nfvperf-scale-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    print(f"store_scale: {args.runs:,} runs, ~{args.trials:,} trials; work dir {work}", flush=True)
    seeds = seed_runs(work)
    print("seeds: " + ", ".join(f"{s['run']['suite']} ({trials_of(s)} trials)" for s in seeds), flush=True)
    results: dict[str, Any] = {}
    for backend in args.backends.split(","):
        pg = None
        try:
            if backend == "sqlite":
                url = "sqlite:///" + str(work / "scale.db")
            elif backend == "postgresql":
                # without --workdir, the cluster's own temporary directory (the work directory
                # is root's, mode 0700, and nobody runs the server)
                pg = PgCluster(work / "pg" if args.workdir else Path(tempfile.mkdtemp(prefix="nfvperf-scale-pg-")))
                why = pg.missing()
                if why:
                    results[backend] = {"skipped": why}
                    print(f"{backend}: skipped: {why}")
                    pg = None
                    continue
                url = pg.start()
            else:
                raise SystemExit(f"--backends: unknown {backend!r}; choose sqlite, postgresql")
            print(f"{backend}: filling {url}", flush=True)
            store = fill(url, seeds, args.runs, args.trials)
            print(f"{backend}: {store}", flush=True)
            results[backend] = {"store": store, "measured": measure(url, work, seeds, args.runs,
                                                                    trend_pages=not (args.quick and results))}
        finally:
            if pg is not None:
                pg.stop()
                if not args.workdir:
                    shutil.rmtree(pg.base, ignore_errors=True)
        if not args.workdir:
            (work / "scale.db").unlink(missing_ok=True)
    table(results)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"runs": args.runs, "trials_target": args.trials, "backends": results,
                      "note": "CPUs shared with other work while measured: times are indicative"}))
    failed = [b for b, r in results.items() for v in (r.get("measured") or {}).values() if v["rc"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

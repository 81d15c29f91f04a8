"""Installing OpenFlow rules at scale (seed 004: up to 1M rules per direction, 2M in all).

``ovs-ofctl add-flows`` sends one flow_mod per rule and OVS commits each on its own: ~15k rules/s
here, so 2M rules took minutes (and hit the old fixed 300 s timeout).  In an OpenFlow bundle
(``ovs-ofctl --bundle add-flows``) OVS commits the whole bundle at once: ~100k rules/s here
(``bench/rule_install.py`` measures both).  The rules go to files in the run directory in chunks
of :data:`CHUNK_RULES` (one bundle each), which bounds what OVS holds uncommitted and lets a
long install report progress.  The time limit grows with the rule count
(:func:`install_timeout_s`); afterwards ``dump-aggregate`` must count exactly the rules asked
for.  Each install is a :class:`RuleInstall` (rules, seconds, rules/s) that the adapter keeps
for the run's environment and the report.
"""
from __future__ import annotations

import itertools
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

#: rules per bundle (per file); OVS holds one bundle uncommitted at a time
CHUNK_RULES = 100_000
#: the time limit of an install: this floor plus the rule count at :data:`MIN_RULES_PER_S`
TIMEOUT_FLOOR_S = 60.0
#: the slowest install rate a limit allows for (bundles do ~100k rules/s on a busy 2-core host;
#: plain add-flows ~15k/s)
MIN_RULES_PER_S = 2_000.0
#: installs of at least this many rules log their progress
PROGRESS_MIN_RULES = 10_000
#: at most one progress line per this many seconds
PROGRESS_EVERY_S = 5.0
#: larger installs keep only their first file after a verified install (2M rules are ~180 MB)
KEEP_FILES_MAX_RULES = 200_000

METHODS = ("bundle", "add-flows")


class RuleInstallError(RuntimeError):
    """Rules could not be installed (timed out, rejected, or the installed count differs)."""


def install_timeout_s(n_rules: int) -> float:
    """Time limit for installing (or deleting) ``n_rules`` rules."""
    return TIMEOUT_FLOOR_S + max(0, n_rules) / MIN_RULES_PER_S


def flow_count(dump_aggregate: str) -> int:
    """``flow_count`` of ``ovs-ofctl dump-aggregate`` output."""
    m = re.search(r"\bflow_count=(\d+)", dump_aggregate)
    if not m:
        raise RuleInstallError(f"no flow_count in dump-aggregate output: {dump_aggregate.strip()[:200]!r}")
    return int(m.group(1))


@dataclass
class RuleInstall:
    """One install of OpenFlow rules on a bridge: its own result (stored in the DUT environment
    as ``rule_installs``, shown in the report)."""

    bridge: str
    rules: int
    seconds: float                 # the ovs-ofctl add-flows calls (not writing the files)
    method: str                    # bundle | add-flows
    chunks: int
    installed: Optional[int]       # dump-aggregate flow_count after the install
    delete_s: float = 0.0          # del-flows before it (replace)
    files: list[str] = field(default_factory=list)
    #: after a verified install of more than KEEP_FILES_MAX_RULES: chunk files deleted (a single
    #: add-flows file is cut to its first CHUNK_RULES lines and counts as 1)
    files_removed: int = 0

    @property
    def rules_per_s(self) -> Optional[float]:
        return self.rules / self.seconds if self.seconds > 0 else None

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 3)
        d["delete_s"] = round(self.delete_s, 3)
        rate = self.rules_per_s
        d["rules_per_s"] = round(rate, 1) if rate is not None else None
        return d


def write_chunks(lines: Sequence[str], directory: Path, stem: str, chunk: int = CHUNK_RULES) -> list[Path]:
    """``lines`` in files ``<stem>.txt`` (one chunk) or ``<stem>.<k>.txt`` (k = 1..)."""
    directory.mkdir(parents=True, exist_ok=True)
    chunk = max(1, chunk)
    n_chunks = max(1, -(-len(lines) // chunk))
    paths = []
    for k in range(n_chunks):
        p = directory / (f"{stem}.txt" if n_chunks == 1 else f"{stem}.{k + 1:03d}.txt")
        with p.open("w") as fh:
            fh.writelines(f"{line}\n" for line in lines[k * chunk:(k + 1) * chunk])
        paths.append(p)
    return paths


def _truncate(path: Path, lines: int) -> None:
    """Keep the first ``lines`` lines of ``path``."""
    tmp = path.with_suffix(".head")
    with path.open() as src, tmp.open("w") as dst:
        dst.writelines(itertools.islice(src, lines))
    tmp.replace(path)


class _Progress:
    """Progress lines of one install: a start line, then one per :data:`PROGRESS_EVERY_S`."""

    def __init__(self, say: Optional[Callable[[str], None]], n: int, bridge: str) -> None:
        self.say = say if n >= PROGRESS_MIN_RULES else None
        self.n, self.bridge = n, bridge
        self.t0 = self.last = time.monotonic()

    def line(self, text: str) -> None:
        if self.say:
            self.say(text)

    def chunk_done(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S and done < self.n:
            self.last = now
            el = now - self.t0
            self.line(f"  OpenFlow rules on {self.bridge}: {done:,} / {self.n:,} ({done / self.n:.0%}) "
                      f"in {el:.1f} s, {done / el:,.0f} rules/s")


def install_rules(lines: Sequence[str], *, bridge: str, directory: Path, stem: str,
                  ofctl: Callable[[list[str], float], str], replace: bool = True,
                  method: str = "bundle", chunk: int = CHUNK_RULES,
                  say: Optional[Callable[[str], None]] = None,
                  publish: Optional[Callable[[Path], str]] = None) -> RuleInstall:
    """Install ``lines`` (ovs-ofctl flow syntax) on ``bridge``.

    ``ofctl(args, timeout_s)`` runs ``ovs-ofctl --timeout=.. <args>`` (``args`` hold the bridge's
    management target in place of ``{br}``) and returns its stdout or raises.  ``replace``
    deletes the bridge's rules first and then requires ``dump-aggregate`` to count exactly
    ``len(lines)``.  ``method``: ``bundle`` (one OpenFlow bundle per chunk) or ``add-flows``
    (the plain, slow way, one file: kept for the benchmark).  ``say``: progress lines.
    ``publish(path)``: where ``ovs-ofctl`` finds a file written to ``directory`` (an OVS on
    another host: the file is copied there first); default the path itself."""
    if method not in METHODS:
        raise ValueError(f"rule install method {method!r}: allowed {', '.join(METHODS)}")
    n = len(lines)
    files = write_chunks(lines, directory, stem, chunk if method == "bundle" else max(1, n))
    delete_s = 0.0
    if replace:
        t = time.monotonic()
        before = flow_count(ofctl(["dump-aggregate", "{br}"], install_timeout_s(0)))
        if before:
            ofctl(["del-flows", "{br}"], install_timeout_s(before))
        delete_s = time.monotonic() - t
    limit = install_timeout_s(n)
    prog = _Progress(say, n, bridge)
    prog.line(f"installing {n:,} OpenFlow rules on {bridge} ({method}, {len(files)} file(s); "
              f"time limit {limit:.0f} s)")
    t0 = time.monotonic()
    done = 0
    opts = ["--bundle"] if method == "bundle" else []
    for k, path in enumerate(files):
        if not n:
            break
        left = limit - (time.monotonic() - t0)
        size = min(chunk, n - done) if method == "bundle" else n
        try:
            if left <= 0:
                raise TimeoutError("no time left")
            ofctl([*opts, "add-flows", "{br}", publish(path) if publish else str(path)], left)
        except Exception as e:  # noqa: BLE001 - re-raised with the count and the time
            el = time.monotonic() - t0
            what = (f"timed out: {n:,} rules are allowed {limit:.0f} s ({TIMEOUT_FLOOR_S:.0f} s + "
                    f"{MIN_RULES_PER_S:,.0f} rules/s)" if el >= limit - 1 else f"failed: {e}")
            raise RuleInstallError(
                f"installing {n:,} OpenFlow rules on {bridge} ({method}) {what}; {done:,} installed "
                f"in {el:.1f} s before file {k + 1} of {len(files)} ({path})") from e
        done += size
        prog.chunk_done(done)
    seconds = time.monotonic() - t0
    installed = flow_count(ofctl(["dump-aggregate", "{br}"], install_timeout_s(n)))
    rec = RuleInstall(bridge=bridge, rules=n, seconds=seconds, method=method, chunks=len(files),
                      installed=installed, delete_s=delete_s, files=[str(p) for p in files])
    if replace and installed != n:
        raise RuleInstallError(
            f"OVS counts {installed:,} rules on {bridge} after installing {n:,} "
            f"(dump-aggregate flow_count): duplicate rules in the list, or OVS dropped some; "
            f"the rules are in {files[0]}" + (" ..." if len(files) > 1 else ""))
    if n > KEEP_FILES_MAX_RULES and len(files) > 1:
        for p in files[1:]:
            p.unlink(missing_ok=True)
        rec.files, rec.files_removed = [str(files[0])], len(files) - 1
    elif n > KEEP_FILES_MAX_RULES:         # one file (add-flows): keep its first chunk's worth
        _truncate(files[0], chunk)
        rec.files_removed = 1
    rate = rec.rules_per_s
    prog.line(f"installed {n:,} OpenFlow rules on {bridge} in {seconds:.1f} s"
              + (f" ({rate:,.0f} rules/s)" if rate else "") + f"; OVS counts {installed:,}")
    return rec

"""Fail on a skip nobody expected.

``make test`` runs pytest in three passes; ``tests/conftest.py`` writes each pass's skips to the
file named by ``$NFVPERF_SKIP_REPORT`` (one JSON object a line: ``nodeid``, ``reason``).  This
script compares them with ``tests/expected_skips.txt`` and exits 1, listing them, when a test
skipped that is not on the list, or skipped for a reason the list does not give it, or when a
pass's report is missing (the pass did not run with the plugin):

    python3 tests/skipcheck.py tests/expected_skips.txt build/pytest-skips/*.jsonl

The list has one line per expected skip: a node id pattern (``*`` matches anything, nothing else is special),
`` | ``, and the text the skip's reason must contain.  A line starting with ``#`` is a comment.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

#: the environment variable naming the file a pytest session writes its skips to
REPORT_ENV = "NFVPERF_SKIP_REPORT"


# ------------------------------------------------------------ the pytest hooks (tests/conftest.py)
_report: Optional[Path] = None


def pytest_configure(config) -> None:
    """Names (and empties: an empty report says the pass ran and nothing skipped) the file this
    session writes its skips to, in the controlling process only: with xdist the workers'
    reports reach it too."""
    global _report
    path = os.environ.get(REPORT_ENV)
    if path and not hasattr(config, "workerinput"):
        _report = Path(path)
        _report.parent.mkdir(parents=True, exist_ok=True)
        _report.write_text("")


def pytest_runtest_logreport(report) -> None:
    path = _report
    if path is None or not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason
    with path.open("a") as f:
        f.write(json.dumps({"nodeid": report.nodeid, "reason": reason}) + "\n")


# ------------------------------------------------------------------------------ the check


@dataclass(frozen=True)
class Expected:
    pattern: str
    reason: str

    def covers(self, nodeid: str, reason: str) -> bool:
        return re.fullmatch(".*".join(map(re.escape, self.pattern.split("*"))), nodeid) is not None \
            and self.reason in reason


def load_expected(path: Path) -> list[Expected]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, reason = line.partition(" | ")
        if not sep or not pattern.strip() or not reason.strip():
            raise ValueError(f"{path}:{n}: expected '<node id pattern> | <reason text>', got {line!r}")
        out.append(Expected(pattern.strip(), reason.strip()))
    return out


def load_skips(path: Path) -> list[dict[str, str]]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def unexpected(skips: list[dict[str, str]], expected: list[Expected]) -> list[dict[str, str]]:
    return [s for s in skips if not any(e.covers(s["nodeid"], s["reason"]) for e in expected)]


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    expected = load_expected(Path(argv[0]))
    bad: list[dict[str, str]] = []
    total = 0
    for rep in map(Path, argv[1:]):
        if not rep.is_file():
            print(f"skip check: no skip report {rep}: that pytest pass did not write one "
                  f"(${REPORT_ENV} unset, or the pass did not run)", file=sys.stderr)
            return 1
        skips = load_skips(rep)
        total += len(skips)
        bad += unexpected(skips, expected)
    if bad:
        print(f"skip check: {len(bad)} unexpected skip(s) (not in {argv[0]}; a skip may only name a "
              "condition outside nfvperf, and an expected one is listed there with its reason):",
              file=sys.stderr)
        for s in bad:
            print(f"  {s['nodeid']}: {s['reason']}", file=sys.stderr)
        return 1
    print(f"skip check: {total} skip(s) in {len(argv) - 1} pass(es), all expected ({argv[0]})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

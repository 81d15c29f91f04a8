"""The README's quick start, as a visitor without root runs it (issue 29 items 1-2): the shell
block between ``<!-- quickstart -->`` markers in README.md, run line by line by bash as the
unprivileged user ``nobody`` in a copy of the package's sources, with Debian's own python3 (not
the one `make deps` installed into).  ``pip install .`` must install the package, not link it, and
the installed package must carry the shipped suites and the report templates: ``nfvperf demo --tg
sim`` writes its HTML reports, and ``nfvperf report`` and ``nfvperf site`` run on its store.

pip fetches the dependencies from PyPI into the venv as the README says; its cache is kept in
/var/tmp (``NFVPERF_QUICKSTART_PIP_CACHE``) so that a second run does not download them again."""
from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USER = "nobody"
CACHE = Path(os.environ.get("NFVPERF_QUICKSTART_PIP_CACHE", "/var/tmp/nfvperf-quickstart-pip-cache"))

pytestmark = [pytest.mark.root, pytest.mark.no_polling, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the quick start as another user"),
              pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs Debian's python3")]


def quickstart_lines() -> list[str]:
    """The commands of README.md's quick-start block, comments dropped."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- quickstart -->\s*```(?:sh|console|bash)\n(.*?)```\s*<!-- /quickstart -->", text, re.S)
    assert m, "README.md has no ```sh block between <!-- quickstart --> and <!-- /quickstart -->"
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in m.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _as_user(script: str, cwd: Path, home: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "PIP_CACHE_DIR": str(CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1", "COLUMNS": "160"}
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return subprocess.run([runuser, "-m", "-u", USER, "--", "bash", "-euo", "pipefail", "-c", script],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def user_dir():
    """A directory the user can reach (pytest's own tmp_path is root's, mode 0700)."""
    d = Path(tempfile.mkdtemp(prefix="nfvperf-quickstart-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_readme_quickstart_as_nobody(user_dir: Path) -> None:
    tmp_path = user_dir
    lines = quickstart_lines()
    assert lines[0].startswith("cd "), "the block starts in the clone: cd nfvperf"
    assert any(re.match(r"pip install \.$", line) for line in lines), "the block installs with pip install ."
    assert not any("-e" in line.split() for line in lines if line.startswith("pip install"))
    assert any(line.startswith("nfvperf demo --tg sim") for line in lines)
    # a clone as the user has it: the package's sources only (no build/, no results/, no .git)
    clone, home = tmp_path / "nfvperf", tmp_path / "home"
    clone.mkdir()
    home.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, clone / name)
    for name in ("src", "suites"):
        shutil.copytree(REPO / name, clone / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    CACHE.mkdir(parents=True, exist_ok=True)
    for top in (tmp_path, CACHE):
        shutil.chown(top, USER)
        for p in top.rglob("*"):
            os.lchown(p, pwd.getpwnam(USER).pw_uid, -1)
    # the opening `cd nfvperf` (we start in the clone) and the browser line are not run
    script = "\n".join(line for line in lines[1:] if not line.startswith(("xdg-open", "open ")))
    script += ('\npython -c "import nfvperf, sys; print(\'PKG\', nfvperf.__file__)"'
               "\nnfvperf report 1 > report.txt\nnfvperf site public")
    p = _as_user(script, clone, home, timeout=900)
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    pkg = next(line.split(" ", 1)[1] for line in p.stdout.splitlines() if line.startswith("PKG "))
    assert "site-packages" in pkg and not pkg.startswith(str(clone / "src")), \
        f"nfvperf was imported from {pkg}, not from the installed package"
    shipped = Path(pkg).parent / "suites"
    assert (shipped / "quick.yaml").is_file() and not shipped.is_symlink(), "the suites are not in the package"
    assert (Path(pkg).parent / "report" / "templates").is_dir()
    reports = sorted(clone.glob("results/runs/*/report.html"))
    assert len(reports) == 2, p.stdout[-2000:]                         # quick.yaml and quick-pvp.yaml
    assert all(r.stat().st_size > 10_000 and r.stat().st_uid != 0 for r in reports)
    assert "zero-loss throughput" in (clone / "report.txt").read_text()
    assert (clone / "public" / "index.html").exists()

"""Shared pytest fixtures (generic: add yours below)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
# every pass of `make test` writes its skips for tests/skipcheck.py (the hooks live there)
from skipcheck import pytest_configure, pytest_runtest_logreport  # noqa: F401

REPO = Path(__file__).resolve().parent.parent

#: a real-generator run (``tg="tgen"``, here often with the sim's measurer behind it) probes the
#: host's CPU steadiness before and after it, 2 s each by default, spinning on each CPU in turn
#: (beside the other xdist worker); no unit or e2e assertion needs a long probe, so these runs
#: probe 0.5 s, as the integration tests' (tests/integration/conftest.py; test_steadiness.py
#: checks the default with the variable removed)
os.environ.setdefault("NFVPERF_STEADINESS_S", "0.5")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_binary(name: str):
    """A PostgreSQL server program: on PATH, or where Debian's postgresql package puts it
    (/usr/lib/postgresql/<version>/bin, newest first)."""
    found = shutil.which(name)
    if found:
        return found
    cands = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"),
                   key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0, reverse=True)
    return str(cands[0]) if cands else None


@pytest.fixture(scope="session")
def pg_url():
    """A throw-away PostgreSQL cluster (initdb + pg_ctl as an unprivileged user, Unix socket only).

    Skips with the reason when the server binaries or psycopg are not installed; a cluster that
    is installed but does not start fails the tests that need it (an error to see, not a skip).
    ``$NFVPERF_TEST_PGDATA`` (tests only) puts the data directory elsewhere, e.g. where initdb
    cannot write, to see that failure.
    """
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg 3 is not installed")
    base = Path(tempfile.mkdtemp(prefix="nfvpg"))
    prefix: list[str] = []
    if os.geteuid() == 0:             # postgres refuses to run as root
        if not shutil.which("runuser"):
            pytest.skip("running as root without runuser: cannot start postgres unprivileged")
        shutil.chown(base, user="nobody")
        prefix = ["runuser", "-u", "nobody", "--"]
    port = _free_port()
    data = Path(os.environ.get("NFVPERF_TEST_PGDATA") or base / "data")
    try:
        subprocess.run(prefix + [initdb, "-D", str(data), "-A", "trust", "-U", "nfvperf", "--no-sync",
                                 "-E", "UTF8"], check=True, capture_output=True, timeout=120)
        subprocess.run(prefix + [pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-t", "60", "-o",
                                 f"-k {base} -p {port} -c listen_addresses= -c fsync=off", "start"],
                       check=True, capture_output=True, timeout=90)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        log = (base / "log").read_text() if (base / "log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.fail(f"PostgreSQL is installed but its cluster did not start: {e} "
                    f"{getattr(e, 'stderr', b'')!r} {log[-500:]}", pytrace=False)
    try:
        yield f"postgresql+psycopg://nfvperf@/postgres?host={base}&port={port}"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True,
                       timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path):
    """A results store on SQLite and (a second run of the test) on PostgreSQL, empty."""
    from nfvperf.store import Store
    from nfvperf.store.models import Base
    if request.param == "sqlite":
        url = "sqlite:///" + str(tmp_path / "r.db")
    else:
        url = request.getfixturevalue("pg_url")
    s = Store(url)
    if request.param == "postgresql":        # one cluster per session: start each test empty
        Base.metadata.drop_all(s.engine)
        Base.metadata.create_all(s.engine)
    yield s
    s.close()

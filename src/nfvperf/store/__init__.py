"""Results store: runs, tests, trials and results in SQLite (default) or PostgreSQL (by URL).

Default location: ``./results/nfvperf.db`` (relative to the working directory); override with
the ``NFVPERF_DB`` environment variable or ``--db URL`` (any SQLAlchemy URL, e.g.
``postgresql+psycopg://user@/nfvperf?host=/run/postgresql``).  A plain path is taken as a SQLite
file.  See docs/results-schema.md.
"""
from nfvperf.store.db import (  # noqa: F401
    Store,
    default_url,
    resolve_url,
)
from nfvperf.store.models import Base, Result, Run, Test, Trial  # noqa: F401

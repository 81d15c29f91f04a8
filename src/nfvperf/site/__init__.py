"""The static results site (issue 17 item 4): ``nfvperf site DIR`` writes an index of the runs,
each run's report, study and comparison pages, and the trend pages, from the store; rebuilt
incrementally (a page is written again only when its inputs changed).  See docs/site.md."""
from nfvperf.site.build import PARTS, build_site  # noqa: F401

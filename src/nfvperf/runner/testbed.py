"""A run on a testbed's hosts (issue 10): its lock held for the run (:func:`holding`);
preflight on every host over SSH (a required check that fails ends the set-up), the hosts
connected, and the topology arguments that build on them; which host does what goes into the
run's environment (``testbed_hosts``)."""
from __future__ import annotations

import secrets
import sys
from typing import Any, Callable, Optional

from nfvperf.config import Suite
from nfvperf.store import Store
from nfvperf.testbed.hold import hold_testbed, remote_hosts_problem
from nfvperf.host.run import RunContext
from nfvperf.testbed.hosts import TestbedHosts, check_testbed, make_host, preflight_failures, topology_kwargs
from nfvperf.testbed.spec import TestbedSpec
from nfvperf.topo import topology_class

from .books import RunOutcome, TestbedUnusable
from .progress import Progress

__all__ = ["holding", "open_testbed"]


def holding(store: Store, testbed: TestbedSpec, tg: str, wait_lock_s: float, log: Optional[Callable[[str], None]],
            run: Callable[[str, dict[str, Any]], RunOutcome]) -> RunOutcome:
    """``run(uid, lock record)`` while holding ``testbed``'s lock: taken first (waiting up to
    ``wait_lock_s``; :class:`nfvperf.store.lock.TestbedLocked` naming the holder, and nothing
    written, when a live run holds it) and released when ``run`` returns or raises;
    :class:`TestbedUnusable` when this build cannot drive the testbed's hosts."""
    problem = remote_hosts_problem(testbed, tg)
    if problem:
        raise TestbedUnusable(problem)
    uid = secrets.token_hex(3)
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    lock = hold_testbed(store, testbed, uid, wait_s=wait_lock_s, say=say)
    try:
        return run(uid, lock.record())
    finally:
        lock.release()
        if lock.lost:
            say(f"warning: {lock.lost}: another run may have used testbed {testbed.name} meanwhile")


def open_testbed(testbed: TestbedSpec, tg: str, suite: Suite, env: dict[str, Any],
                 progress: Progress, run: Optional[RunContext] = None
                 ) -> tuple[TestbedHosts, dict[str, Any]]:
    """Check and connect ``testbed``'s hosts for a run of ``suite``; returns the open hosts and
    the topology keywords (generator and DUT hosts, cabled links) for the measurer factory.
    The testbed's ``guest:`` hosts are booted first, for the run ``run`` (its tag and run
    directory), and stopped by the hosts' ``close()``.
    No harness ceiling on a testbed (it would measure this machine, not the tester host): the
    caller turns it off."""
    if tg != "tgen":
        raise ValueError(f"--testbed runs the generator on the tester host: use --tg tgen, "
                         f"not --tg {tg}")
    tspec = suite.spec.topology
    vnfs: list[Any] = getattr(topology_class(tspec.kind), "vnf_classes_for", lambda _s: [])(tspec)
    hosts = TestbedHosts(testbed)
    try:
        if testbed.guests():
            hosts.boot_guests(run or RunContext(), say=progress.log)
        rows = check_testbed(testbed, dut=tspec.dut, port_kind=tspec.port_kind,
                             vnf_binaries=sorted({b for v in vnfs for b in v.binaries},
                                                 key=lambda b: b.name),
                             make=lambda n, h: hosts.hosts[n] if h.guest else make_host(n, h))
        info = env.setdefault("testbed_hosts", {})
        info["preflight"] = [r.to_dict() for r in rows]
        bad = preflight_failures(rows)
        if bad:
            raise RuntimeError(f"testbed {testbed.name}: preflight failed: " + "; ".join(bad))
        hosts.open()
    except BaseException:
        hosts.close()
        raise
    info["hosts"] = hosts.public()
    kw = topology_kwargs(testbed, hosts)
    info["roles"] = {"generator": kw["tg_host"].name, "dut": kw["dut_host"].name,
                     "latency_clock": kw["tg_host"].name}
    info["links"] = kw["testbed_links"]
    progress.log(f"testbed {testbed.name}: generator on {kw['tg_host'].name}, DUT on "
                 f"{kw['dut_host'].name}, {len(kw['testbed_links'])} cabled link(s)")
    return hosts, dict(kw)

"""Run a validated suite: run record + run dir, a measurer, tests x frame sizes, every trial stored.

The runner owns the life cycle around the methods:

* a run row (status ``running``) and a run directory tagged ``nfv<uid>`` exist before the first
  trial; every trial is committed as it ends (``Recorder.trial``), so Ctrl-C or a crash keeps it;
* the measurer comes from :func:`measurer_for` (``sim``, or ``tgen`` / ``iperf3`` through
  ``nfvperf.topo``; ``iperf3`` runs only the ``tcp`` method, on ``Topology.tcp_endpoints()``),
  entered as a context manager so the topology is released on every exit path;
* what runs is the plan's (:func:`nfvperf.plan.plan_run`, the decision ``nfvperf validate``
  prints too): a unit the plan skips (its topology does not fit this host or cannot be built
  here, or the measurer cannot run its method) is stored ``skipped`` with the reason before
  anything is built, and with ``fit_host`` the suite's topologies are the fitted ones;
* an error in one test marks that test ``failed`` with the reason and the run goes on; a
  topology group whose build fails its preflight is ``skipped`` with the reason, one whose
  build fails otherwise has its units ``failed``, and the run goes on with the next group;
  a :class:`DutFailure` ends the run (``failed``); a run where nothing ran is ``failed``;
* Ctrl-C (SIGINT) or SIGTERM marks the running test and the run ``interrupted``; the CLI exits 130.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from nfvperf.config import ProfileSpec, Suite, format_link_speed, topology_overrides
from nfvperf.host.preflight import PreflightError
from nfvperf.host.run import PROGRESS_LOGGER
from nfvperf.methods import rate_methods, runs_on_iperf3
from nfvperf.plan import RunPlan, plan_run, test_units, tso_refusal, unit_label
from nfvperf.store import Store
from nfvperf.store.db import jsonable, process_starttime
from nfvperf.testbed.spec import TestbedSpec
from nfvperf.topo import tx_pairs
from nfvperf.topo.base import HostTooSmall
from nfvperf.units import directions
from nfvperf.trial import DutFailure, Measurer, TrafficProfile

EXIT_OK, EXIT_TEST_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class TestbedUnusable(RuntimeError):
    """The run cannot use its testbed (nothing was written)."""

    __test__ = False


@dataclass
class RunOutcome:
    run_id: int
    uid: str
    status: str                      # completed | failed | interrupted
    run_dir: Path
    failed_tests: list[str] = field(default_factory=list)
    reason: Optional[str] = None
    skipped_tests: list[str] = field(default_factory=list)   # the plan's skips, and failed preflights

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return EXIT_INTERRUPTED
        if self.status == "failed" or self.failed_tests:
            return EXIT_TEST_FAILED
        return EXIT_OK


# --------------------------------------------------------------------------- interrupts

class Interrupts:
    """SIGINT/SIGTERM -> KeyboardInterrupt, but never inside a store commit (``critical()``)."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending = False
        self.hit = False
        self.extra = 0
        self.keep_ignoring = False
        self._old: dict[int, Any] = {}
        self.owner = os.getpid()

    def _handler(self, signum: int, _frame: Any) -> None:
        if os.getpid() != self.owner:
            # a child forked by the topology code (netns helpers) inherited this handler: it must
            # die as it would have by default, never unwind into the runner and touch the store
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            os._exit(128 + signum)
        if self.hit:
            # already unwinding: the topology is being released; do not abort that half-way
            self.extra += 1
            if self.extra < 3:
                with contextlib.suppress(Exception):
                    os.write(2, b"nfvperf: stopping, releasing the topology (Ctrl-C 3 times to force)\n")
                return
            raise KeyboardInterrupt(signal.Signals(signum).name)
        self.hit = True
        if self.depth > 0:
            self.pending = True
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0 and self.pending:
                self.pending = False
                raise KeyboardInterrupt("SIGINT")

    def __enter__(self) -> "Interrupts":
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handler)
        except ValueError:      # not the main thread: leave the defaults
            self._old.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, h in self._old.items():
            # a process that exits after an interrupted run keeps ignoring Ctrl-C until it has
            # said so (exit 130), instead of dying by the signal half-way through its last lines
            signal.signal(sig, signal.SIG_IGN if self.hit and self.keep_ignoring else h)


# --------------------------------------------------------------------------- progress

class Progress:
    """Rich progress bar with ETA over all (test, frame size) units; plain lines without a tty."""

    def __init__(self, total_units: int, enabled: bool = True, stream: Any = None):
        self.total = max(1, total_units)
        self.done_units = 0
        self.stream = stream or sys.stderr
        self._bar = None
        self._task = None
        if enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import (BarColumn, Progress as RichProgress, TaskProgressColumn,
                                       TextColumn, TimeElapsedColumn, TimeRemainingColumn)
            self._bar = RichProgress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     TaskProgressColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(), console=Console(file=self.stream),
                                     transient=False)
            self._task = self._bar.add_task("starting", total=self.total)

    def __enter__(self) -> "Progress":
        if self._bar:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar:
            self._bar.stop()

    def unit(self, label: str) -> None:
        if self._bar and self._task is not None:
            from rich.markup import escape
            self._bar.update(self._task, description=escape(label), completed=self.done_units)

    def fraction(self, frac: float, message: Optional[str] = None) -> None:
        frac = min(1.0, max(0.0, frac))
        if self._bar and self._task is not None:
            kw: dict[str, Any] = {"completed": self.done_units + frac}
            if message:
                from rich.markup import escape
                kw["description"] = escape(message)
            self._bar.update(self._task, **kw)

    def unit_done(self) -> None:
        self.done_units += 1
        if self._bar and self._task is not None:
            self._bar.update(self._task, completed=self.done_units)

    def log(self, text: str) -> None:
        """Print a line; a closed stdout/stderr (``| head``) must never fail the run."""
        if self.stream is None:
            return
        try:
            if self._bar:
                self._bar.console.print(text, highlight=False, markup=False)
            else:
                print(text, file=self.stream, flush=True)
        except (OSError, ValueError):
            self.stream = None


@contextlib.contextmanager
def progress_logs(say: Callable[[str], None]) -> Iterator[None]:
    """While inside: INFO lines of :data:`~nfvperf.host.run.PROGRESS_LOGGER` (progress of long
    set-up steps, e.g. installing 2M OpenFlow rules) go to ``say`` (the run's progress log)."""
    class _Say(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            say(record.getMessage())

    lg = logging.getLogger(PROGRESS_LOGGER)
    handler, level = _Say(logging.INFO), lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    try:
        yield
    finally:
        lg.removeHandler(handler)
        lg.setLevel(level)


# --------------------------------------------------------------------------- recorder

class Recorder:
    """What a method sees: ``trial()`` stores a trial at once, ``progress()`` moves the bar."""

    def __init__(self, store: Store, test_id: int, interrupts: Interrupts, progress: Progress,
                 label: str):
        self.store = store
        self.test_id = test_id
        self.interrupts = interrupts
        self._progress = progress
        self.label = label
        self.trials = 0
        self.repetition: Optional[int] = None     # set while a repeated search runs (``repeat``)

    def trial(self, test: Any = None, result: Any = None, **context: Any) -> None:
        if result is None and test is not None and not isinstance(test, str):
            test, result = None, test          # recorder.trial(TrialResult) also accepted
        if test is not None:
            context.setdefault("test", test if isinstance(test, (str, int, float)) else str(test))
        if self.repetition is not None:
            context.setdefault("repetition", self.repetition)
        with self.interrupts.critical():
            self.store.add_trial(self.test_id, result, context)
        self.trials += 1

    def progress(self, *args: Any, **kwargs: Any) -> None:
        """Accepts ``progress(0.4)``, ``progress(done, total)``, ``progress(fraction=, message=)``."""
        message = kwargs.pop("message", None) or kwargs.pop("msg", None) or kwargs.pop("text", None)
        frac = kwargs.pop("fraction", None)
        if frac is None and "done" in kwargs and kwargs.get("total"):
            frac = kwargs["done"] / kwargs["total"]
        nums = [a for a in args if isinstance(a, (int, float)) and not isinstance(a, bool)]
        strs = [a for a in args if isinstance(a, str)]
        if frac is None and len(nums) >= 2 and nums[1]:
            frac = nums[0] / nums[1]
        elif frac is None and len(nums) == 1:
            frac = nums[0] if nums[0] <= 1 else None
        if message is None and strs:
            message = strs[0]
        desc = f"{self.label}: {message}" if message else None
        if frac is not None:
            self._progress.fraction(float(frac), desc)
        elif desc:
            self._progress.unit(desc)

    def log(self, text: str) -> None:
        self._progress.log(text)


# --------------------------------------------------------------------------- environment

def _run(args: list[str], timeout: float = 5.0) -> Optional[str]:
    if not shutil.which(args[0]):
        return None
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    out = (p.stdout or "").strip()
    return out if p.returncode == 0 and out else None


def _cpu_model() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_environment() -> dict[str, Any]:
    """CPU, kernel, python, DPDK/OVS package versions (argument-list subprocesses only)."""
    env: dict[str, Any] = {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpus_online": os.cpu_count(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "os": _os_release(),
        "python": platform.python_version(),
        "nfvperf": _version(),
    }
    try:
        env["cmdline"] = Path("/proc/cmdline").read_text().strip()
    except OSError:
        pass
    pkgs = {}
    for pkg in ("dpdk", "libdpdk-dev", "openvswitch-switch", "openvswitch-switch-dpdk", "qemu-system-x86"):
        v = _run(["dpkg-query", "-W", "-f=${Version}", pkg])
        if v:
            pkgs[pkg] = v
    env["packages"] = pkgs
    ovs = _run(["ovs-vswitchd", "--version"])
    if ovs:
        env["ovs_vswitchd_version"] = ovs.splitlines()[0]
        dpdk_line = [ln for ln in ovs.splitlines() if "DPDK" in ln]
        if dpdk_line:
            env["ovs_dpdk"] = dpdk_line[0]
    dpdk = _run(["pkg-config", "--modversion", "libdpdk"])
    if dpdk:
        env["dpdk_version"] = dpdk
    return env


def _os_release() -> Optional[str]:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def _version() -> str:
    from nfvperf import __version__
    return __version__


# --------------------------------------------------------------------------- measurer factory

def make_sim_measurer(suite: Suite, spec: Any = None) -> Measurer:
    """The simulated DUT for topology ``spec`` (default: the suite's), set from the suite's
    ``sim:``; :meth:`RunLoop.measure_unit` sets it again per test unit (:func:`configure_sim`)."""
    from nfvperf.tg.sim import SimMeasurer  # the core engineer's modelled DUT
    sim = suite.spec.sim
    m = SimMeasurer(**sim.measurer_kwargs(), unit=sim_unit(spec or suite.spec.topology))
    m.per_unit = True     # type: ignore[attr-defined]  # configure_sim applies each unit's config
    if sim.pace_s > 0:
        pace(m, sim.pace_s)
    return m


def sim_unit(spec: Any, params: Any = None) -> Any:
    """What the sim's model needs from a topology spec (and a test's method params): DUT, kind,
    switching operations, VNFs, ports, PMD cores (``pmd_cores``/``ht`` or ``cores``/``ht`` when
    the DUT options have them, else the popcount of ``pmd_cpu_mask``), rx queues, rules, SMC, TCP TSO/multi-queue."""
    import nfvperf.topo as topo
    from nfvperf.tg.sim_model import SimUnit, popcount_mask
    opts = spec.dut_class().options(spec)     # the DUT's own topology section (ovs:, testpmd: ...)
    cores = getattr(opts, "pmd_cores", None) or getattr(opts, "cores", None)
    rxq = getattr(opts, "n_rxq", None) or getattr(opts, "queues", None) or 1
    return SimUnit(dut=spec.dut, datapath=getattr(opts, "datapath", None), kind=spec.kind,
                   switching_ops=topo.switching_operations(spec),
                   n_vnfs=int(getattr(topo.topology_class(spec.kind), "n_vnfs", 0) or 0),
                   vnf=str(getattr(spec, "vnf", "container")), ports=int(spec.ports),
                   pmd_cores=int(cores) if cores else None, ht=bool(getattr(opts, "ht", False)),
                   pmd_threads=popcount_mask(getattr(opts, "pmd_cpu_mask", None)), n_rxq=int(rxq),
                   rules=int(getattr(opts, "rules", 0) or 0), smc=getattr(opts, "smc_enable", None),
                   tso=getattr(params, "tso", None), multiqueue=getattr(params, "multiqueue", None))


def configure_sim(m: Any, suite: Suite, spec: Any, test: Any, size: Optional[int]) -> None:
    """Set a simulated DUT for one test unit: the suite's ``sim:`` with the test's on top, and
    the unit's configuration (topology spec, method params) for the model."""
    sim = getattr(test, "sim", None) or suite.spec.sim
    m.configure(**sim.measurer_kwargs(), unit=sim_unit(spec, test.params_for(size)))


def pace(m: Measurer, seconds: float) -> None:
    """Make every trial of ``m`` take ``seconds`` of wall time (the sim itself never sleeps)."""
    for name in ("measure", "measure_segments", "measure_burst", "measure_reset", "measure_addresses",
                 "measure_tcp"):
        fn = getattr(m, name, None)
        if fn is None:
            continue

        def slow(*a: Any, _fn: Callable[..., Any] = fn, **kw: Any) -> Any:
            time.sleep(seconds)
            return _fn(*a, **kw)
        setattr(m, name, slow)


@contextlib.contextmanager
def measurer_for(suite: Suite, tg: str, tag: str, run_dir: Path, info: dict[str, Any],
                 spec: Any = None, topo_kwargs: Optional[dict[str, Any]] = None) -> Iterator[Measurer]:
    """Yields a measurer for topology ``spec`` (default: the suite's); fills ``info`` with the
    topology environment and its switching operations.  ``topo_kwargs``: more arguments of the
    topology (a testbed run: its hosts and cabled links)."""
    spec = spec or suite.spec.topology
    bidir = bool(suite.spec.traffic.bidirectional)
    if tg == "sim":
        m = make_sim_measurer(suite, spec)
        info["switching_operations"] = topology_switching_operations(spec)
        info["switching_operations_source"] = f"declared by topology kind {spec.kind}"
        with m:
            yield m
        return
    if tg not in ("tgen", "iperf3"):
        raise ValueError(f"--tg {tg!r}: allowed sim, tgen, iperf3")
    import nfvperf.topo as topo  # lazily: needs root and the topology code
    build_kw: dict[str, Any] = {"start_tgen": False} if tg == "iperf3" else {}
    build_kw.update(topo_kwargs or {})
    with topo.build(spec, topo.RunContext(tag=tag, run_dir=run_dir), **build_kw) as topology:
        # a topology whose TCP ends are its own (iperf3 inside its guests: nfvperf.topo.tcp_vm)
        own_tcp = getattr(topology, "tcp_measurer", None) if tg == "iperf3" else None
        ends = topology.tcp_endpoints() if tg == "iperf3" and own_tcp is None else None
        try:
            info["environment"] = topology.environment()
        except Exception as e:  # noqa: BLE001 - environment is best effort
            info["environment"] = {"error": str(e)}
        try:
            info["switching_operations"] = int(topology.switching_operations(bidir))
            info["switching_operations_source"] = "topology"
        except Exception:  # noqa: BLE001
            info["switching_operations"] = topology_switching_operations(spec)
            info["switching_operations_source"] = f"declared by topology kind {spec.kind}"
        if own_tcp is not None:
            m = own_tcp(info)
        elif ends is not None:
            m = iperf3_measurer(topology, ends, info)
        else:
            m = topology.measurer()
        # in-place DUT changes between the units of an interleaved study (nfvperf.rounds)
        m.reconfigure_topology = getattr(topology, "reconfigure", None)  # type: ignore[attr-defined]
        with m:
            yield m


def topology_switching_operations(spec: Any) -> int:
    """Switching operations per frame that the topology class for ``spec.kind`` declares."""
    import nfvperf.topo as topo
    return topo.switching_operations(spec)


def iperf3_measurer(topology: Any, ends: dict[str, Any], info: dict[str, Any]) -> Measurer:
    """``--tg iperf3``: an Iperf3Measurer on the topology's TCP endpoints (client on port 0's
    generator end, server on port 1's), so the ``tcp`` method's traffic crosses the DUT."""
    from nfvperf.tg.iperf3 import Iperf3Measurer
    dut = topology.dut
    dut_name = getattr(dut, "name", None) or topology.spec.dut
    dut_version = None
    with contextlib.suppress(Exception):
        dut_version = (info.get("environment") or {}).get("dut", {}).get("version")
    path = dict(ends, topology=topology.kind, dut=dut_name, dut_version=dut_version,
                tag=topology.run.tag,
                note="iperf3 client/server on the generator ends of ports 0/1; the DUT forwards "
                     "between them")
    info["tcp_endpoints"] = path
    m = Iperf3Measurer.in_namespaces(ends["client_ns"], ends["server_ns"], ends["server_ip"],
                                     path=path, dut_counters=topology.dut_counters,
                                     dut_alive=topology.dut_alive, workdir=topology.run.run_dir)
    m.tso_refusal = tso_refusal(topology.spec)
    return m


# --------------------------------------------------------------------------- the run

def method_entry(name: str) -> tuple[Any, Callable[..., Any]]:
    from nfvperf.methods import REGISTRY
    entry = REGISTRY[name]
    if isinstance(entry, tuple):
        return entry[0], entry[1]
    return getattr(entry, "params", None), entry.run


def result_dict(res: Any) -> dict[str, Any]:
    if res is None:
        return {}
    d = jsonable(res)
    return d if isinstance(d, dict) else {"value": d}


def create_run(suite: Suite, store: Store, tg: str, out_dir: Path, uid: Optional[str] = None,
               testbed: Optional[TestbedSpec] = None,
               testbed_lock: Optional[dict[str, Any]] = None) -> tuple[Any, Path, dict[str, Any]]:
    """The run row (status ``running``, the config, the pid that runs it) and the run directory
    (a copy of the suite file and ``run.json``, a reference to the run in the store).  Returns
    (run row, run dir, the environment dict the run keeps filling).  ``testbed``: recorded as
    the run's ``testbed`` column and ``environment["testbed"]`` (its public form: no secrets)."""
    spec, timing = suite.spec, suite.timing
    kinds = list(dict.fromkeys((t.topology or spec.topology).kind for t in suite.tests))
    duts = list(dict.fromkeys((t.topology or spec.topology).dut for t in suite.tests))
    # pid first: a killed run is recognisable (Store.mark_aborted_runs)
    env: dict[str, Any] = {"host": {}, "tg": tg, "profile_deviations": timing.deviations(),
                           "ports": spec.topology.ports,
                           "link_speed": format_link_speed(spec.traffic.link_speed_bps),
                           "topologies": [], "pid": os.getpid(), "hostname": platform.node(),
                           "pid_starttime": process_starttime(os.getpid())}
    if testbed is not None:
        env["testbed"] = testbed.public()
        env["testbed_lock"] = testbed_lock
    run = store.create_run(suite=spec.name, suite_path=str(suite.source) if suite.source else None,
                           topology="+".join(kinds), dut="+".join(duts) if tg != "sim" else
                           f"sim ({'+'.join(duts)} model)", tg=tg, profile=timing.name,
                           config=suite.to_dict(), environment=env, uid=uid,
                           testbed=testbed.name if testbed is not None else None)
    env["tag"] = run.tag
    run_dir = (out_dir / "runs" / run.tag).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if suite.source and Path(suite.source).exists():
        shutil.copyfile(suite.source, run_dir / "suite.yaml")
    (run_dir / "run.json").write_text(json.dumps(run_reference(store, run), indent=2) + "\n")
    store.update_run(run.id, run_dir=str(run_dir), environment=env)
    return run, run_dir, env


def run_reference(store: Store, run: Any) -> dict[str, Any]:
    """What ``<run dir>/run.json`` holds: where the run (its resolved config, every trial) is stored."""
    from sqlalchemy.engine import make_url
    url = make_url(store.url).render_as_string(hide_password=True)
    return {"run_id": run.id, "uid": run.uid, "tag": run.tag, "store": url,
            "export": ["nfvperf", "export", str(run.id), "--db", url]}


@dataclass
class CeilingOptions:
    """How a run gets its harness ceiling: ``enabled`` (``--no-ceiling`` sets False; the suite's
    ``ceiling.enabled`` too), ``refresh`` (measure even if cached), the cache file, and the
    measuring function (tests inject one)."""

    enabled: bool = True
    refresh: bool = False
    cache_path: Optional[Path] = None
    measure_fn: Optional[Callable[..., dict[str, Any]]] = None

    def off_reason(self, tg: str, suite: Suite) -> Optional[str]:
        if tg != "tgen":
            return f"--tg {tg}: no harness ceiling"
        if not self.enabled or not suite.spec.ceiling.enabled:
            return "turned off (--no-ceiling or ceiling.enabled: false)"
        return None

    def measure(self, spec: Any, tag: str, run_dir: Path, profiles: dict[int, TrafficProfile],
                suite: Suite, log: Callable[[str], None]) -> dict[str, Any]:
        cfg = suite.spec.ceiling
        if self.measure_fn is not None:
            return self.measure_fn(spec, profiles, log=log)
        from nfvperf.store.ceiling import CeilingCache
        from nfvperf.topo import RunContext
        from nfvperf.topo.ceiling import default_cache_path, harness_ceiling
        cache = CeilingCache(self.cache_path or default_cache_path(run_dir.parent.parent),
                             max_age_s=cfg.max_age_h * 3600.0, refresh=self.refresh)
        return harness_ceiling(spec, RunContext(tag=tag, run_dir=run_dir / "ceiling"), profiles,
                               cache=cache, trial_s=cfg.trial_s, resolution=cfg.resolution, log=log)


def ceiling_path_key(topo_spec: Any, test: Any) -> str:
    """What makes two topology groups share a harness ceiling: the path's port kind, PCI
    addresses, MTU, generator lcores, link speed and the topology/DUT (their CPU plans)."""
    return json.dumps([topo_spec.port_kind, list(topo_spec.pci), getattr(topo_spec, "mtu", 1500),
                       topo_spec.tgen_lcores, topo_spec.kind, topo_spec.dut,
                       test.traffic.link_speed_bps], default=str)


class RunLoop:
    """One run while it executes: topology groups, test units, the books (see :func:`execute`)."""

    def __init__(self, suite: Suite, store: Store, tg: str, run: Any, run_dir: Path, env: dict[str, Any],
                 progress: Progress, interrupts: Interrupts, factory: Callable[..., Any]):
        self.suite, self.store, self.tg, self.run, self.run_dir, self.env = suite, store, tg, run, run_dir, env
        self.progress, self.interrupts, self.factory = progress, interrupts, factory
        self.outcome = RunOutcome(run_id=run.id, uid=run.uid, status="running", run_dir=run_dir)
        self.status = "completed"
        self.reason: Optional[str] = None
        self.current_test: Optional[int] = None
        self.measured: dict[str, float] = {}   # zero-loss throughput found so far, for prerequisite reuse
        self.ceiling = CeilingOptions()
        self.ceilings: dict[str, dict[str, Any]] = {}   # harness ceilings of this run, by path key
        self.hosts: Any = None         # a testbed run: nfvperf.testbed.hosts.TestbedHosts
        self.plan: Optional[RunPlan] = None     # what runs and what is skipped (nfvperf.plan)
        self.stored: set[tuple[int, Optional[int]]] = set()   # units with a test row
        self.said: set[str] = set()             # skip reasons already logged
        self.first_failure: Optional[str] = None   # "<unit>: <reason>" of the first failed unit
        self.group_tg = tg             # the measurer of the topology group being run (by_measurer)

    # ------------------------------------------------------------------ lent to nfvperf.rounds
    def recorder(self, test_id: int, label: str) -> "Recorder":
        return Recorder(self.store, test_id, self.interrupts, self.progress, label)

    def configure_unit(self, measurer: Measurer, spec: Any, test: Any, size: Optional[int]) -> None:
        """A simulated DUT takes the unit's configuration (a real one was built for it)."""
        if getattr(measurer, "per_unit", False):
            configure_sim(measurer, self.suite, spec, test, size)

    @staticmethod
    def label(test: Any, size: Optional[int]) -> str:
        return unit_label(test, size)

    # ------------------------------------------------------------------ testbed (issue 10)
    def use_testbed(self, testbed: Any) -> None:
        """Run on ``testbed``'s hosts: preflight on every host over SSH (a required check that
        fails ends the set-up), the hosts connected, the topology built with them; which host
        did what goes into the environment.  No harness ceiling (it would measure this
        machine, not the tester host)."""
        import functools

        from nfvperf.testbed.hosts import (TestbedHosts, check_testbed, preflight_failures,
                                           topology_kwargs)
        if self.tg != "tgen":
            raise ValueError(f"--testbed runs the generator on the tester host: use --tg tgen, "
                             f"not --tg {self.tg}")
        from nfvperf.topo import topology_class
        tspec = self.suite.spec.topology
        vnfs: list[Any] = getattr(topology_class(tspec.kind), "vnf_classes_for", lambda _s: [])(tspec)
        rows = check_testbed(testbed, dut=tspec.dut, port_kind=tspec.port_kind,
                             vnf_binaries=sorted({b for v in vnfs for b in v.binaries},
                                                 key=lambda b: b.name))
        info = self.env.setdefault("testbed_hosts", {})
        info["preflight"] = [r.to_dict() for r in rows]
        bad = preflight_failures(rows)
        if bad:
            raise RuntimeError(f"testbed {testbed.name}: preflight failed: " + "; ".join(bad))
        self.hosts = TestbedHosts(testbed).open()
        info["hosts"] = self.hosts.public()
        kw = topology_kwargs(testbed, self.hosts)
        info["roles"] = {"generator": kw["tg_host"].name, "dut": kw["dut_host"].name,
                         "latency_clock": kw["tg_host"].name}
        info["links"] = kw["testbed_links"]
        self.factory = functools.partial(self.factory, topo_kwargs=kw)
        self.ceiling.enabled = False
        self.env["harness_ceiling_off"] = "testbed run: the ceiling is measured on one machine"
        self.progress.log(f"testbed {testbed.name}: generator on {kw['tg_host'].name}, DUT on "
                          f"{kw['dut_host'].name}, {len(kw['testbed_links'])} cabled link(s)")
        with self.interrupts.critical():
            self.store.update_run(self.run.id, environment=self.env)

    def close_testbed(self) -> None:
        if self.hosts is not None:
            self.hosts.close()
            self.hosts = None

    # ------------------------------------------------------------------ topology groups
    def run_groups(self, groups: list[tuple[Any, list]]) -> None:
        self.env["host"] = host_environment()
        self.cpu_steadiness("before the run")
        for topo_spec, group in groups:
            if self.status != "completed":
                break
            group = self.skip_planned(topo_spec, group)
            if not group:
                continue
            if topo_spec is ROUNDS:
                from nfvperf.rounds import RoundsRun
                RoundsRun(self, group).run()
                continue
            for group_tg, units in self.by_measurer(group):
                if self.status != "completed":
                    break
                self.group_tg = group_tg
                self.harness_ceiling(topo_spec, units)
                try:
                    self.run_group(topo_spec, units)
                except (HostTooSmall, PreflightError) as e:
                    self.skip_group(topo_spec, self.not_stored(units), str(e))
                except DutFailure:
                    raise                       # a DUT (or its host) that died ends the run
                except Exception:  # noqa: BLE001 - one topology's failed build must not end the run
                    self.group_failed(topo_spec, units)
        self.cpu_steadiness("after it")

    def by_measurer(self, group: list[tuple[Any, Optional[int]]]) -> list[tuple[str, list[tuple[Any, Optional[int]]]]]:
        """The group's consecutive units by the measurer the plan gives them (``--tg tgen`` runs
        a tcp unit with iperf3 through the same topology, built for it without the generator)."""
        out: list[tuple[str, list[tuple[Any, Optional[int]]]]] = []
        for test, size in group:
            u = self.plan.unit(test, size) if self.plan is not None else None
            tg = u.measurer if u is not None else self.tg
            if out and out[-1][0] == tg:
                out[-1][1].append((test, size))
            else:
                out.append((tg, [(test, size)]))
        return out

    def cpu_steadiness(self, when: str) -> None:
        """Before a real run on this machine builds anything, and after its last topology is
        down: how much the CPUs' speed moves on its own (``nfvperf.host.steadiness``), the worse
        of the two probes in ``environment.cpu_steadiness`` (both under ``probes``)."""
        if self.tg == "sim" or self.hosts is not None or (self.plan is not None and not self.plan.running):
            return
        from nfvperf.host.steadiness import combine, probe_cpus, steadiness_text
        try:
            st = probe_cpus()
        except Exception as e:  # noqa: BLE001 - a failed probe must not fail the run
            st = {"error": f"{type(e).__name__}: {e}"}
        st["when"] = when
        before = (self.env.get("cpu_steadiness") or {}).get("probes") or []
        self.env["cpu_steadiness"] = combine([*before, st])
        self.progress.log(f"host CPU steadiness: {steadiness_text(st)}")
        with self.interrupts.critical():
            self.store.update_run(self.run.id, environment=self.env)

    def skip_planned(self, topo_spec: Any, group: list[tuple[Any, Optional[int]]]) -> list[tuple[Any, Optional[int]]]:
        """Store the group's units the plan skips (``skipped``, with the plan's reason); returns
        the others."""
        if self.plan is None:
            return group
        todo = []
        for test, size in group:
            why = self.plan.skip_reason(test, size)
            if why is None:
                todo.append((test, size))
                continue
            spec = test.topology or self.suite.spec.topology
            if why not in self.said:
                self.said.add(why)
                self.progress.log(f"skipped ({spec.kind}): {why}")
            self.store_skipped(spec, test, size, why)
        return todo

    def store_skipped(self, topo_spec: Any, test: Any, size: Optional[int], why: str) -> None:
        label = unit_label(test, size)
        with self.interrupts.critical():
            row = self.store.start_test(self.run.id, name=test.name, method=test.method,
                                        frame_size_b=size, params=test.params_dict(size),
                                        traffic=self.suite.traffic_profile(test, size),
                                        topology={"kind": topo_spec.kind}, study=test.study)
            self.store.finish_test(row.id, "skipped", why)
        self.stored.add((id(test), size))
        self.outcome.skipped_tests.append(label)
        self.progress.unit(label)
        self.progress.unit_done()

    def fit_changes(self, test: Any, size: Optional[int]) -> list[Any]:
        """What ``--fit-host`` changed in this unit's topology (nfvperf.fit.FitChange)."""
        u = self.plan.unit(test, size) if self.plan is not None else None
        return list(u.changes) if u is not None else []

    def not_stored(self, group: list[tuple[Any, Optional[int]]]) -> list[tuple[Any, Optional[int]]]:
        return [(t, s) for t, s in group if (id(t), s) not in self.stored]

    def skip_group(self, topo_spec: Any, group: list[tuple[Any, Optional[int]]], why: str) -> None:
        """A topology whose build found, before anything started, that this host cannot run it
        (too small, hardware missing, a required preflight check failed): its units are stored as
        ``skipped`` with the reason, and the run goes on with the next topology."""
        self.progress.log(f"topology {topo_spec.kind} skipped: {why}")
        info = self.env["topologies"][-1] if self.env["topologies"] else {}
        info["skipped"] = why
        for test, size in group:
            self.store_skipped(topo_spec, test, size, why)

    def group_failed(self, topo_spec: Any, group: list[tuple[Any, Optional[int]]]) -> None:
        """Called in the ``except`` of a topology group that failed otherwise (its build, its
        release): the units it did not run are ``failed`` with the reason; the run goes on."""
        exc = sys.exc_info()[1]
        why = f"{type(exc).__name__}: {exc}"
        with (self.run_dir / "errors.log").open("a") as fh:
            fh.write(f"== topology {topo_spec.kind}\n{traceback.format_exc()}\n")
        self.progress.log(f"topology {topo_spec.kind} FAILED: {why} (details in "
                          f"{self.run_dir / 'errors.log'}); the run goes on")
        for test, size in self.not_stored(group):
            with self.interrupts.critical():
                row = self.store.start_test(self.run.id, name=test.name, method=test.method,
                                            frame_size_b=size, params=test.params_dict(size),
                                            traffic=self.suite.traffic_profile(test, size),
                                            topology={"kind": topo_spec.kind}, study=test.study)
            self.stored.add((id(test), size))
            self.unit_failed(row.id, unit_label(test, size), f"topology set-up failed: {why}")
            self.progress.unit_done()

    # ------------------------------------------------------------------ harness ceiling
    def harness_ceiling(self, topo_spec: Any, group: list[tuple[Any, Optional[int]]]) -> None:
        """Before a topology group of a real run: the harness ceiling for its path (port kind,
        link speed, MTU, generator cores) at the sizes of its throughput/latency units, from the
        cache or measured; stored in ``environment.harness_ceiling(s)``.  Never fails the run."""
        why_off = self.ceiling.off_reason(self.group_tg, self.suite)
        if why_off:
            self.env.setdefault("harness_ceiling_off", why_off)
            return
        wanted = [(t, s) for t, s in group if s and (t.method in rate_methods() or t.method == "latency")]
        if not wanted:
            return
        key = ceiling_path_key(topo_spec, wanted[0][0])
        have = self.ceilings.get(key)
        timing = ProfileSpec(name="quick")
        profiles: dict[int, TrafficProfile] = {}
        for t, s in wanted:
            if s is not None and s not in profiles and not (have and str(s) in have["per_size"]):
                profiles[s] = t.traffic.profile(s, timing)
        if not profiles:
            return
        self.progress.unit(f"harness ceiling ({topo_spec.port_kind})")
        self.progress.log(f"harness ceiling for {topo_spec.port_kind} at {', '.join(map(str, sorted(profiles)))} B "
                          "(tgen through testpmd io in place of the DUT)")
        try:
            res = self.ceiling.measure(topo_spec, self.run.tag, self.run_dir, profiles, self.suite,
                                       self.progress.log)
        except Exception as e:  # noqa: BLE001 - a failed ceiling must not fail the run
            res = {"port_kind": topo_spec.port_kind, "per_size": {}, "cached": False,
                   "error": f"{type(e).__name__}: {e}"}
            self.progress.log(f"  harness ceiling: FAILED ({res['error']}); the run goes on without it")
        if have:
            have["per_size"].update(res.get("per_size") or {})
            have["cached"] = bool(have.get("cached")) and bool(res.get("cached"))
            if res.get("error"):
                have["error"] = res["error"]
        else:
            self.ceilings[key] = res
            self.env.setdefault("harness_ceilings", []).append(res)
            self.env.setdefault("harness_ceiling", res)
        with self.interrupts.critical():
            self.store.update_run(self.run.id, environment=self.env)

    def run_group(self, topo_spec: Any, group: list[tuple[Any, Optional[int]]]) -> None:
        """Build one topology (the measurer's context), run its units, release it."""
        info: dict[str, Any] = {"kind": topo_spec.kind,
                                "overrides": topology_overrides(topo_spec, self.suite.spec.topology)}
        fitted = [c.text() for t, s in group for c in self.fit_changes(t, s)]
        if fitted:
            info["fitted_to_host"] = list(dict.fromkeys(fitted))
        if self.group_tg != self.tg:
            info["measurer_tg"] = self.group_tg
        self.env["topologies"].append(info)
        with self.factory(self.suite, self.group_tg, self.run.tag, self.run_dir, info, topo_spec) as measurer:
            self.record_measurer(info, measurer)
            # the test rows keep what reports read; the spec itself is run.config.topology + overrides
            topo_row = {"kind": topo_spec.kind, "ports": topo_spec.ports,
                        "switching_operations": info.get("switching_operations"),
                        "overrides": info["overrides"]}
            for test, size in group:
                if not self.run_unit(measurer, topo_spec, topo_row, test, size):
                    break

    def record_measurer(self, info: dict[str, Any], measurer: Measurer) -> None:
        try:
            info["measurer"] = measurer.environment()
        except Exception as e:  # noqa: BLE001
            info["measurer"] = {"error": str(e)}
        env = self.env
        env.setdefault("switching_operations", info.get("switching_operations"))
        env.setdefault("switching_operations_source", info.get("switching_operations_source"))
        env["measurer"] = info["measurer"]
        env["cores_shared"] = _cores_shared(env)
        self.store.update_run(self.run.id, environment=env)

    # ------------------------------------------------------------------ one (test, size) unit
    def run_unit(self, measurer: Measurer, topo_spec: Any, topo_row: dict[str, Any], test: Any,
                 size: Optional[int]) -> bool:
        """Run and store one unit.  An error fails this unit only; a DUT failure fails the run
        (returns False); KeyboardInterrupt goes up to :func:`execute`."""
        label = unit_label(test, size)
        self.progress.unit(label)
        profile = self.suite.traffic_profile(test, size)
        ndir = directions(test.traffic, topo_spec.ports, tx_pairs(topo_spec))
        row = dict(topo_row, directions=ndir)
        fitted = [c.text() for c in self.fit_changes(test, size)]
        if fitted:
            row["fitted_to_host"] = fitted
        trow = self.store.start_test(self.run.id, name=test.name, method=test.method, frame_size_b=size,
                                     params=test.params_dict(size), traffic=profile,
                                     topology=row, study=test.study)
        self.stored.add((id(test), size))
        self.current_test = trow.id
        rec = Recorder(self.store, trow.id, self.interrupts, self.progress, label)
        t0 = time.monotonic()
        try:
            text = self.measure_unit(measurer, topo_spec, test, size, profile, ndir, trow.id, rec, label)
            self.progress.log(f"  {label}: {text} [{rec.trials} trials, {time.monotonic() - t0:.1f} s]")
        except DutFailure as e:
            self.unit_failed(trow.id, label, f"DUT failure: {e}")
            self.status, self.reason = "failed", f"DUT failure in {label}: {e}"
            self.progress.log(f"  {label}: DUT FAILURE: {e}; stopping the run")
            return False
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - one test's error must not end the run
            tb = traceback.format_exc(limit=8)
            self.unit_failed(trow.id, label, f"{type(e).__name__}: {e}")
            with (self.run_dir / "errors.log").open("a") as fh:
                fh.write(f"== {label}\n{tb}\n")
            self.progress.log(f"  {label}: FAILED: {type(e).__name__}: {e}")
        self.progress.unit_done()
        return True

    def measure_unit(self, measurer: Measurer, topo_spec: Any, test: Any, size: Optional[int],
                     profile: TrafficProfile, ndir: int, test_id: int, rec: Recorder, label: str) -> str:
        """The method's run and its stored result; returns the log text."""
        from nfvperf.report.extract import summarize_result
        if self.group_tg == "iperf3" and not runs_on_iperf3(test.method):
            from nfvperf.trial import Unsupported
            raise Unsupported(f"method {test.method} needs --tg tgen or sim "
                              "(--tg iperf3 runs only the tcp method)")
        _params_model, run_fn = method_entry(test.method)
        params = reuse_throughput(test, size, topo_spec, self.measured)
        if params is not test.params_for(size):
            self.store.update_test_params(test_id, params_dump(params))
            self.progress.log(f"  {label}: using the Throughput measured earlier in this run "
                              f"({params.throughput_pps:,.0f} fps per interface)")
        measurer.set_profile(profile)
        if getattr(measurer, "per_unit", False):
            configure_sim(measurer, self.suite, topo_spec, test, size)
        reps = max(1, int(getattr(test, "repeat", 1) or 1))
        datas = []
        for i in range(reps):
            if reps > 1:
                rec.repetition = i + 1
                self.progress.log(f"  {label}: repetition {i + 1} of {reps}")
            datas.append(result_dict(run_fn(measurer, profile, params, rec)))
        rec.repetition = None
        data = combine_repetitions(test.method, datas, profile, ndir) if reps > 1 else datas[0]
        summary = summarize_result(test.method, data, profile.to_dict(), ndir)
        failed = data.get("passed") is False or data.get("status") == "failed"
        if test.method == "throughput" and summary.get("value_pps") and zero_loss(data):
            self.measured.setdefault(throughput_key(test, size, topo_spec), summary["value_pps"])
        with self.interrupts.critical():
            self.store.add_result(test_id, test.method, data, value_pps=summary.get("value_pps"))
            self.store.finish_test(test_id, "failed" if failed else "passed",
                                   str(data.get("reason") or "the method reported a failure")
                                   if failed else None)
        self.current_test = None
        if failed:
            self.outcome.failed_tests.append(label)
        return summary.get("text", "done")

    def unit_failed(self, test_id: int, label: str, reason: str) -> None:
        if self.first_failure is None:
            self.first_failure = f"{label}: {reason}"
        with self.interrupts.critical():
            self.store.finish_test(test_id, "failed", reason)
        self.current_test = None
        self.outcome.failed_tests.append(label)

    # ------------------------------------------------------------------ endings
    def interrupted(self) -> None:
        self.status, self.reason = "interrupted", "interrupted by signal (Ctrl-C)"
        with contextlib.suppress(Exception):
            if self.current_test is not None:
                self.store.finish_test(self.current_test, "interrupted", self.reason)

    def setup_failed(self) -> None:
        """Called in the ``except`` of a set-up failure (topology, measurer)."""
        exc = sys.exc_info()[1]
        self.status, self.reason = "failed", f"{type(exc).__name__}: {exc}"
        with (self.run_dir / "errors.log").open("a") as fh:
            fh.write(traceback.format_exc())
        self.progress.log(f"run set-up failed: {self.reason} (details in {self.run_dir / 'errors.log'})")

    def finish(self, n_units: int) -> None:
        """Close the books: final status and reason, environment, headline."""
        from nfvperf.report.extract import headline_of_run
        failed = self.outcome.failed_tests
        if self.status == "completed" and failed:
            self.status = "failed"
            self.reason = (f"{len(failed)} of {n_units} test unit(s) failed: "
                           + ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else "")
                           + (f" (first: {self.first_failure})" if self.first_failure else ""))
        skipped = self.outcome.skipped_tests
        if self.status == "completed" and skipped and len(skipped) == n_units:
            self.status = "failed"
            self.reason = (f"nothing ran: all {n_units} test unit(s) skipped (see the tests' reasons; "
                           f"`nfvperf validate` with the same options lists them)")
        elif self.status == "completed" and skipped:
            self.reason = (f"{len(skipped)} of {n_units} test unit(s) skipped (see the tests' reasons): "
                           + ", ".join(skipped[:3]) + (" ..." if len(skipped) > 3 else ""))
        self.store.update_run(self.run.id, environment=self.env)
        headline = None
        with contextlib.suppress(Exception):
            headline = headline_of_run(self.store.load_run(self.run.id))
        self.store.finish_run(self.run.id, self.status, self.reason, headline)
        self.outcome.status, self.outcome.reason = self.status, self.reason


def execute(suite: Suite, *, store: Store, tg: str = "sim", out_dir: Path = Path("results"),
            show_progress: bool = True, log: Callable[[str], None] | None = None,
            measurer_factory: Optional[Callable[..., Any]] = None, exiting: bool = False,
            ceiling: Optional[CeilingOptions] = None, testbed: Optional[TestbedSpec] = None,
            wait_lock_s: float = 0.0, fit_host: bool = False) -> RunOutcome:
    """Run the suite; returns the outcome (never raises KeyboardInterrupt unless forced by a third
    Ctrl-C).  ``exiting``: the caller exits after this (the CLI); after an interrupt, further
    Ctrl-Cs stay ignored.  ``ceiling``: how the harness ceiling is got (``--tg tgen`` only;
    default: measured or taken from ``<out_dir>/harness-ceiling.json``).

    ``testbed``: run on that testbed: its lock is taken first (waiting up to ``wait_lock_s``;
    :class:`nfvperf.store.lock.TestbedLocked` naming the holder, and nothing written, when a live
    run holds it) and released when the books are closed, also after a failure or Ctrl-C;
    :class:`TestbedUnusable` when this build cannot drive its hosts.

    ``fit_host``: run the suite fitted to this host (``--fit-host``, :mod:`nfvperf.fit`); the
    changes are stored in ``environment.fit_host`` and on each unit's test row."""
    if testbed is None:
        return _execute(suite, store=store, tg=tg, out_dir=out_dir, show_progress=show_progress, log=log,
                        measurer_factory=measurer_factory, exiting=exiting, ceiling=ceiling,
                        fit_host=fit_host)
    from nfvperf.testbed.hold import hold_testbed, remote_hosts_problem
    problem = remote_hosts_problem(testbed, tg)
    if problem:
        raise TestbedUnusable(problem)
    uid = secrets.token_hex(3)
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    lock = hold_testbed(store, testbed, uid, wait_s=wait_lock_s, say=say)
    try:
        return _execute(suite, store=store, tg=tg, out_dir=out_dir, show_progress=show_progress, log=log,
                        measurer_factory=measurer_factory, exiting=exiting, ceiling=ceiling, uid=uid,
                        testbed=testbed, testbed_lock=lock.record(), fit_host=fit_host)
    finally:
        lock.release()
        if lock.lost:
            say(f"warning: {lock.lost}: another run may have used testbed {testbed.name} meanwhile")


def _execute(suite: Suite, *, store: Store, tg: str, out_dir: Path, show_progress: bool,
             log: Callable[[str], None] | None, measurer_factory: Optional[Callable[..., Any]], exiting: bool,
             ceiling: Optional[CeilingOptions], uid: Optional[str] = None, testbed: Optional[TestbedSpec] = None,
             testbed_lock: Optional[dict[str, Any]] = None, fit_host: bool = False) -> RunOutcome:
    plan = plan_run(suite, tg, fit_host=fit_host, on_testbed=testbed is not None,
                    builds=tg != "sim" and testbed is None and measurer_factory is None)
    suite = plan.suite
    run, run_dir, env = create_run(suite, store, tg, out_dir, uid=uid, testbed=testbed, testbed_lock=testbed_lock)
    record_plan(store, run, env, plan)
    units = test_units(suite)
    groups = topology_groups(units, suite.spec.topology)
    progress = Progress(len(units), enabled=show_progress)
    say = log or progress.log
    say(f"run {run.id} ({run.tag}): suite {suite.spec.name!r}, {len(units)} test unit(s) on "
        f"{len(groups)} topolog{'y' if len(groups) == 1 else 'ies'}, tg={tg}, profile={suite.timing.name}, "
        + (f"testbed {testbed.name}, " if testbed is not None else "") + f"run dir {run_dir}")
    interrupts = Interrupts()
    interrupts.keep_ignoring = exiting
    loop = RunLoop(suite, store, tg, run, run_dir, env, progress, interrupts, measurer_factory or measurer_for)
    loop.plan = plan
    if plan.fit_host:
        say(f"fitted to host ({plan.host.describe() if plan.host else 'this host'}): "
            + (plan.fitted_summary() or "nothing to change"))
    if plan.skipped:
        say(f"{len(plan.skipped)} of {len(units)} test unit(s) will be skipped (reasons below and in "
            f"the report; `nfvperf validate` with the same options lists them)")
    if ceiling is not None:
        loop.ceiling = ceiling
    # the handler stays installed until the books are closed: a second Ctrl-C while the topology
    # is released or the run is marked must not cut that short (Interrupts ignores it)
    interrupts.__enter__()
    try:
        with progress, progress_logs(progress.log):
            if testbed is not None and tg != "sim":
                loop.use_testbed(testbed)
            loop.run_groups(groups)
    except KeyboardInterrupt:
        _only_owner(interrupts.owner)
        interrupts.hit = True          # from now on further signals are only noted
        loop.interrupted()
    except Exception:  # noqa: BLE001 - set-up failed (topology, measurer)
        _only_owner(interrupts.owner)
        loop.setup_failed()
    finally:
        _only_owner(interrupts.owner)
        try:
            loop.close_testbed()
            loop.finish(len(units))
        finally:
            interrupts.__exit__(None, None, None)
    outcome = loop.outcome
    say(f"run {run.id} ({run.tag}) {outcome.status}" + (f": {outcome.reason}" if outcome.reason else ""))
    return outcome


def record_plan(store: Store, run: Any, env: dict[str, Any], plan: RunPlan) -> None:
    """The plan in the run's environment: ``plan`` (measurer, host, each skipped unit and its
    reason, each fitted change and its units) and, with ``--fit-host``, ``fit_host`` (the host
    and the changes as text, what the report prints)."""
    env["plan"] = plan.record()
    if plan.fit_host:
        env["fit_host"] = {"host": plan.host.describe() if plan.host else None,
                           "changes": [r["text"] for r in plan.fitted()],
                           "summary": plan.fitted_summary()}
    store.update_run(run.id, environment=env)


def combine_repetitions(method: str, datas: list[dict[str, Any]], profile: TrafficProfile,
                        ndir: int) -> dict[str, Any]:
    """One stored result for a search run ``len(datas)`` times (``repeat``): the repetition with
    the median headline (the lower middle one for an even count) with every repetition under
    ``repetitions`` and ``repeat`` = :func:`nfvperf.search.result.repeat_summary` (median, min,
    max, relative range, max/min) plus ``median_repetition`` (1-based).  The headline fields
    (``throughput_pps`` and its ``rates``) hold the median itself."""
    from nfvperf.methods.common import rates
    from nfvperf.report.extract import summarize_result
    from nfvperf.search.result import repeat_summary
    prof = profile.to_dict()
    values = [summarize_result(method, d, prof, ndir).get("value_pps") for d in datas]
    summ = repeat_summary(values)
    order = sorted(range(len(datas)), key=lambda i: values[i] or 0.0)
    mid = order[(len(order) - 1) // 2]
    data = dict(datas[mid])
    data["repeat"] = dict(summ, median_repetition=mid + 1)
    data["repetitions"] = datas
    if "throughput_pps" in data and summ["median_pps"] is not None:
        data["throughput_pps"] = summ["median_pps"]
        data["rates"] = rates(summ["median_pps"], profile)
    return data


def throughput_key(test: Any, size: Optional[int], topo_spec: Any) -> str:
    traffic = test.traffic.model_dump(exclude={"frame_sizes", "rate_unit", "latency"})
    sim = getattr(test, "sim", None)     # a test's own sim: settings model another DUT
    return json.dumps([size, topo_spec.model_dump(mode="json"), traffic] +
                      ([sim.model_dump(mode="json")] if sim is not None else []), sort_keys=True, default=str)


def zero_loss(data: dict[str, Any]) -> bool:
    """An RFC 2544 Throughput: the first goal has loss ratio 0 and exceed ratio 0 (binary search,
    the rfc2544 MLR preset), not an NDR/PDR with a 50 % exceed ratio."""
    goals = data.get("goals") or [{}]
    g = goals[0] if isinstance(goals[0], dict) else {}
    return float(g.get("loss_ratio") or 0.0) == 0.0 and float(g.get("exceed_ratio") or 0.0) == 0.0


def params_dump(params: Any) -> dict[str, Any]:
    return params.model_dump(mode="json") if hasattr(params, "model_dump") else dict(params or {})


def reuse_throughput(test: Any, size: Optional[int], topo_spec: Any, measured: dict[str, float]) -> Any:
    """A method that needs the Throughput first (latency, back-to-back, recovery, reset, RFC 2889
    forwarding) gets the zero-loss Throughput an earlier test of this run measured at the same
    size, topology and traffic, unless its entry sets ``throughput_pps``; its ``throughput:``
    block is then only the fallback when no earlier measurement exists."""
    params = test.params_for(size)
    fields = getattr(type(params), "model_fields", {})
    if "throughput_pps" not in fields or getattr(params, "throughput_pps", None) is not None:
        return params
    v = measured.get(throughput_key(test, size, topo_spec))
    if not v:
        return params
    return params.model_copy(update={"throughput_pps": v})


#: the topology slot of a group that is an interleaved study (``nfvperf.rounds``)
ROUNDS = object()


def in_rounds(test: Any) -> bool:
    """A unit of a study that runs in interleaved rounds."""
    return bool((getattr(test, "study", None) or {}).get("rounds"))


def topology_groups(units: list[tuple[Any, Optional[int]]], default: Any) -> list[tuple[Any, list]]:
    """Consecutive test units on the same topology share one build (torn down between groups).
    The units of a study with ``rounds`` form one group ``(ROUNDS, units)`` where the study's
    first unit stands (their topologies are built by ``nfvperf.rounds``)."""
    groups: list[tuple[Any, list]] = []
    studies: dict[str, list] = {}
    for test, size in units:
        if in_rounds(test):
            name = test.study["name"]
            if name not in studies:
                studies[name] = []
                groups.append((ROUNDS, studies[name]))
            studies[name].append((test, size))
            continue
        spec = test.topology or default
        if groups and groups[-1][0] == spec:
            groups[-1][1].append((test, size))
        else:
            groups.append((spec, [(test, size)]))
    return groups



def _only_owner(owner: int) -> None:
    """A forked child that unwinds into the runner exits here instead of writing the run's status."""
    if os.getpid() != owner:
        os._exit(1)


def _cores_shared(env: dict[str, Any]) -> Optional[bool]:
    for info in env.get("topologies", []):
        for part in ("environment", "measurer"):
            v = (info.get(part) or {}).get("cores_shared")
            if v is not None:
                return bool(v)
    return None

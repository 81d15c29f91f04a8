"""TSO and queue count of the kernel interfaces of a TCP path (the ``tcp`` method's ``tso`` and
``multiqueue`` params), set with ``ethtool -K`` / ``ethtool -L`` and read back with
``ethtool -k`` / ``ethtool -l``.  A setting an interface refuses, or that does not read back as
asked, raises :class:`MeasurerError` naming the field (``params.tso`` / ``params.multiqueue``)."""
from __future__ import annotations

import shutil
from typing import Any, Optional, Sequence, Union

from nfvperf.host.proc import LOCAL, CommandError
from nfvperf.trial import MeasurerError

Queues = Union[bool, int, None]


def _ethtool(argv: list[str], ns: Optional[str], host: Any, field: str) -> str:
    """Run ``argv`` (an ethtool command: ``["ethtool", "-K", ifname, ...]``) in ``ns``."""
    try:
        return str((host or LOCAL).run(argv, netns=ns, check=True, timeout=20.0).stdout)
    except CommandError as e:
        raise MeasurerError(f"{field}: {' '.join(argv)} refused on {ns or '(host)'}/{argv[2]}: {e}") from None


def read_tso(ifname: str, ns: Optional[str], host: Any = None) -> str:
    """``ethtool -k``'s tcp-segmentation-offload value ("on", "off", "off [fixed]" ...)."""
    out = _ethtool(["ethtool", "-k", ifname], ns, host, "params.tso")
    for line in out.splitlines():
        k, _, v = line.partition(":")
        if k.strip() == "tcp-segmentation-offload":
            return v.strip()
    return "unknown"


def read_channels(ifname: str, ns: Optional[str], host: Any = None) -> dict[str, dict[str, Optional[int]]]:
    """``ethtool -l`` -> {"max": {"rx", "tx", "combined"}, "current": {...}} (None for n/a)."""
    out = _ethtool(["ethtool", "-l", ifname], ns, host, "params.multiqueue")
    res: dict[str, dict[str, Optional[int]]] = {"max": {}, "current": {}}
    part = "max"
    for line in out.splitlines():
        if line.startswith("Current hardware settings"):
            part = "current"
        k, _, v = line.partition(":")
        key = k.strip().lower()
        if key in ("rx", "tx", "combined"):
            v = v.strip()
            res[part][key] = int(v) if v.isdigit() else None
    return res


def _set_tso(ifname: str, ns: Optional[str], on: bool, host: Any) -> str:
    # TSO needs scatter-gather and tx checksumming (the DUT topologies turn those off)
    word = "on" if on else "off"
    argv = ["ethtool", "-K", ifname] + (["tx", word, "sg", word] if on else []) + ["tso", word]
    _ethtool(argv, ns, host, "params.tso")
    state = read_tso(ifname, ns, host)
    if state.split()[0] != ("on" if on else "off"):
        raise MeasurerError(f"params.tso: {ns or '(host)'}/{ifname} reports tcp-segmentation-offload "
                            f"{state!r} after 'tso {'on' if on else 'off'}' (the driver does not "
                            f"support changing it; leave params.tso unset)")
    return state


def _set_queues(ifname: str, ns: Optional[str], want: Union[bool, int], host: Any) -> dict[str, Any]:
    ch = read_channels(ifname, ns, host)
    mx = ch["max"]
    combined = bool(mx.get("combined"))
    limit = mx.get("combined") if combined else min(mx.get("rx") or 0, mx.get("tx") or 0)
    if not limit:
        raise MeasurerError(f"params.multiqueue: {ns or '(host)'}/{ifname} has no settable channels "
                            f"(ethtool -l: {ch}); leave params.multiqueue unset")
    n = limit if want is True else 1 if want is False else int(want)
    if n > limit:
        raise MeasurerError(f"params.multiqueue: {n} queues asked but {ns or '(host)'}/{ifname} allows "
                            f"at most {limit} (ethtool -l; veth: the CPU count or its numrxqueues)")
    argv = ["ethtool", "-L", ifname, *(w for k in (("combined",) if combined else ("rx", "tx")) for w in (k, str(n)))]
    _ethtool(argv, ns, host, "params.multiqueue")
    cur = read_channels(ifname, ns, host)["current"]
    got = cur.get("combined") if combined else min(cur.get("rx") or 0, cur.get("tx") or 0)
    if got != n:
        raise MeasurerError(f"params.multiqueue: {ns or '(host)'}/{ifname} reads back {cur} after "
                            f"{' '.join(argv)}")
    return {"queues": n, "max_queues": limit, "channels": cur}


def apply(ifaces: Sequence[tuple[Optional[str], str]], tso: Optional[bool] = None,
          multiqueue: Queues = None, host: Any = None) -> dict[str, dict[str, Any]]:
    """Set TSO (None: leave) and the queue count (None: leave; True: the most the interface
    allows; False: 1; N: N) on every ``(netns, ifname)``; returns what reads back per
    ``"<ns>/<if>"``: ``tso`` (ethtool -k) and ``queues``/``max_queues``/``channels`` (ethtool -l)."""
    if tso is None and multiqueue is None:
        return {}
    if not shutil.which("ethtool"):
        field = "params.tso" if tso is not None else "params.multiqueue"
        raise MeasurerError(f"{field}: ethtool not found (apt-get install ethtool)")
    out: dict[str, dict[str, Any]] = {}
    for ns, ifname in ifaces:
        st: dict[str, Any] = {}
        if tso is not None:
            st["tso"] = _set_tso(ifname, ns, tso, host)
        if multiqueue is not None:
            st.update(_set_queues(ifname, ns, multiqueue, host))
        out[f"{ns or '(host)'}/{ifname}"] = st
    return out

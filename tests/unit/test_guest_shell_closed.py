"""A guest's shell closing mid-command says why QEMU went away (its status and log, the guest
console), not only that the socket closed: under TCG, QEMU 7.2 has died of SIGSEGV here."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nfvperf.trial import DutFailure
from nfvperf.vm.guest import ShellGuest


class _Shell:
    def run_line(self, line: str, timeout: float = 30.0) -> tuple[int, str]:
        raise DutFailure("vm0: guest shell /run/x/vm-vm0-ctl.sock closed during 'cat /proc/158/stat'")


class _Proc:
    def __init__(self, exits_after: int, running_forever: bool = False):
        self.polls, self.exits_after, self.forever = 0, exits_after, running_forever

    def running(self) -> bool:
        self.polls += 1
        return self.forever or self.polls <= self.exits_after

    def check(self) -> None:
        if not self.running():
            raise DutFailure("qemu-vm0 exited with signal 11 (SIGSEGV); log /run/x/qemu-vm0.log: ...")


def _guest(proc: Any, tmp_path) -> ShellGuest:
    g = ShellGuest.__new__(ShellGuest)
    g.ready, g.shell, g.proc, g.vnf_name = True, _Shell(), proc, "vm0"
    g.console_log = tmp_path / "console.log"
    g.testpmd_log = tmp_path / "shell.log"
    g.console_log.write_text("[  12.3] virtio_net virtio0: ...\n")
    g.testpmd_log.write_text("")
    g.wait_ready = lambda timeout=None: None            # type: ignore[method-assign]
    g._lock = SimpleNamespace(__enter__=lambda *a: None, __exit__=lambda *a: None)
    return g


def test_shell_closed_because_qemu_died_names_the_signal_and_the_console(tmp_path):
    g = _guest(_Proc(exits_after=3), tmp_path)
    with pytest.raises(DutFailure) as e:
        g.shell_line("cat /proc/158/stat")
    msg = str(e.value)
    assert "signal 11 (SIGSEGV)" in msg and "guest console" in msg and "virtio_net" in msg


def test_shell_closed_while_qemu_runs_keeps_the_shells_error(tmp_path):
    g = _guest(_Proc(exits_after=0, running_forever=True), tmp_path)
    with pytest.raises(DutFailure, match="guest shell .* closed during"):
        g._died_why = lambda wait_s=2.0: ShellGuest._died_why(g, 0.2)  # type: ignore[method-assign]
        g.shell_line("cat /proc/158/stat")

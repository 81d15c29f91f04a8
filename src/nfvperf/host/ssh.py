"""A host reached over SSH (issue 10): :class:`SshHost`, the same interface as
:class:`~nfvperf.host.proc.LocalHost`, over paramiko (no ``ssh`` binary, no shell strings built
from user input: every remote argument is quoted with :func:`shlex.quote`).

* **Host keys are never learnt.**  The key the host presents must equal the testbed's
  ``host_key`` or the entry for the address in its ``known_hosts`` file; an unknown or changed key
  raises :class:`HostKeyError` before any authentication.
* **Keepalives**: paramiko sends a keepalive every ``keepalive_s``; with ``TCP_USER_TIMEOUT`` and
  TCP keepalives set to ~3 intervals a silent host (cable pulled, rebooted) breaks the connection
  within seconds; a killed sshd breaks it at once.  :meth:`SshHost.check` raises
  :class:`HostLost` then, and every remote process reports it in :meth:`Process.check`.
* **Processes** (:meth:`SshHost.popen`, used by :class:`~nfvperf.host.proc.Process`) run under
  the agent's ``guard`` (:mod:`nfvperf.host.agent`): their own process group, ``NFVPERF_TAG`` in
  their environment (``cleanup`` by tag works on every host), killed when their channel closes
  (stop, controller killed, connection lost).  Their output is copied into the controller's log
  files as it comes.
* **Files**: :meth:`exists`, :meth:`read_text`, :meth:`write_text`, :meth:`mkdir`,
  :meth:`remove`, :meth:`rmtree`, :meth:`glob`, :meth:`put`, :meth:`get` (SFTP).
* **Connections**: :meth:`connect_unix` (a socket-like channel to a Unix socket on the host,
  tgen's RPC), :meth:`open_tcp` (direct-tcpip) and :meth:`forward` (a local TCP port forwarded
  to a port on the host).

Secrets (the key file's path, the key) are never logged or put in messages or results:
:meth:`public` describes the host by name, address, port and user only.
"""
from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Sequence, Union

import paramiko

from nfvperf.trial import DutFailure

from .base import Host, ProcessOptions, Stream
from .netns import connect_in_netns, netns_argv
from .proc import CommandError, Process
from .remote_preflight import BUNDLE_NAME, SCRIPT, PreflightNeeds, bundle
from .run import ResourceTracker, RunContext
from .ssh_popen import RemotePopen

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

__all__ = ["SshHost", "SshError", "HostKeyError", "HostLost", "RemotePopen", "fingerprint"]

AGENT_SOURCE = (Path(__file__).parent / "agent.py").read_text()
AGENT_NAME = "nfvperf-agent-" + hashlib.sha256(AGENT_SOURCE.encode()).hexdigest()[:12] + ".py"


class SshTarget(Protocol):
    """Where and how to log in (``nfvperf.testbed.spec.SshSpec``, a layer above)."""

    address: str
    port: int
    user: str
    host_key: Optional[str]
    connect_timeout_s: float
    keepalive_s: float

    def key_path(self) -> Optional[Path]: ...

    def known_hosts_path(self) -> Optional[Path]: ...


class SshError(RuntimeError):
    """The host cannot be reached or logged in to; the message names the host and the fix."""


class HostKeyError(SshError):
    """The host presented a key the testbed does not name (unknown or changed): refused."""


class HostLost(DutFailure):
    """The connection to a host broke during the run (sshd killed, host rebooted or silent)."""


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a public key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _pkey_from_line(line: str) -> paramiko.PKey:
    parts = line.split()
    if len(parts) < 2:
        raise ValueError("not 'type base64'")
    return paramiko.PKey.from_type_string(parts[0], base64.b64decode(parts[1]))


class SshHost:
    """A host of a testbed reached over SSH (see the module doc).

    ``SshHost(name, ssh_spec, role=..., work_dir=...)``; :meth:`connect` (also called by the
    first use) opens the connection, checks the host key and logs in; :meth:`close` ends it
    (every remote process of this controller dies with it)."""

    remote = True
    #: :meth:`run`'s longest wait for output, or for the exit status after the output's end
    RECV_WAIT_S = 0.2

    def __init__(self, name: str, ssh: SshTarget, *, role: str = "", work_dir: str = "/var/lib/nfvperf"):
        self.name = name
        self.ssh = ssh                       # a nfvperf.testbed.spec.SshSpec
        self.role = role
        self.work_dir = work_dir
        self._transport: Optional[paramiko.Transport] = None
        self._sftp: Optional[paramiko.SFTPClient] = None
        self._lock = threading.RLock()
        self._agent: Optional[str] = None
        self._lost: Optional[str] = None
        self._closed = False
        self._forwards: list[LocalForward] = []

    # ------------------------------------------------------------------ connection
    @property
    def where(self) -> str:
        return f"{self.name} ({self.ssh.user}@{self.ssh.address}:{self.ssh.port})"

    def public(self) -> dict[str, object]:
        """What a result may record about this host: no key, no key path."""
        return {"name": self.name, "role": self.role, "address": self.ssh.address,
                "port": self.ssh.port, "user": self.ssh.user, "via": "ssh"}

    def expected_keys(self) -> list[paramiko.PKey]:
        """The host keys the testbed names for this host (host_key, known_hosts entries)."""
        keys = []
        if self.ssh.host_key:
            try:
                keys.append(_pkey_from_line(self.ssh.host_key))
            except Exception as e:  # noqa: BLE001
                raise HostKeyError(f"hosts.{self.name}.ssh.host_key: not a public key "
                                   f"('ssh-ed25519 AAAA...'): {e}") from None
        kh = self.ssh.known_hosts_path() if hasattr(self.ssh, "known_hosts_path") else None
        if kh is not None:
            hk = paramiko.HostKeys()
            try:
                hk.load(str(kh))
            except (OSError, paramiko.SSHException) as e:
                raise HostKeyError(f"hosts.{self.name}.ssh.known_hosts: cannot be read "
                                   f"({type(e).__name__}); give a readable known_hosts file or "
                                   f"host_key:") from None
            names = [self.ssh.address] if self.ssh.port == 22 else []
            names.append(f"[{self.ssh.address}]:{self.ssh.port}")
            for n in names:
                keys += list((hk.lookup(n) or {}).values())
        return keys

    def connect(self) -> "SshHost":
        with self._lock:
            if self._transport is not None and self._transport.is_active():
                return self
            if self._closed:
                raise SshError(f"{self.where}: the connection was closed")
            expected = self.expected_keys()
            if not expected:
                raise HostKeyError(f"{self.where}: no key for this host in the testbed "
                                   f"(hosts.{self.name}.ssh.host_key or its known_hosts file); "
                                   f"unknown host keys are never accepted")
            t = self._open_transport()
            try:
                self._check_key(t, expected)
                self._login(t)
            except BaseException:
                t.close()
                raise
            t.set_keepalive(max(1, int(round(self.ssh.keepalive_s))))
            self._transport = t
            self._lost = None
            self._sftp = None
            self._agent = None
            log.info("connected to %s", self.where)
            return self

    def _open_transport(self) -> paramiko.Transport:
        timeout = float(self.ssh.connect_timeout_s)
        # a host whose address is in a network namespace of this machine (a testbed guest's
        # management NIC, nfvperf.testbed.guests): the connection is made in there
        ns = getattr(self.ssh, "netns", None)
        try:
            sock = connect_in_netns(ns, self.ssh.address, self.ssh.port, timeout) if ns else \
                socket.create_connection((self.ssh.address, self.ssh.port), timeout=timeout)
        except OSError as e:
            raise SshError(f"{self.where}: cannot connect ({e.strerror or e}); is the host up "
                           f"and sshd listening on that address and port?") from None
        ka = float(self.ssh.keepalive_s)
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, max(1, int(ka)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(1, int(ka)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(ka * 3 * 1000))
        t = paramiko.Transport(sock)
        t.banner_timeout = timeout
        t.handshake_timeout = timeout
        try:
            t.start_client(timeout=timeout)
        except (paramiko.SSHException, OSError, EOFError) as e:
            t.close()
            raise SshError(f"{self.where}: SSH handshake failed ({e})") from None
        return t

    def _check_key(self, t: paramiko.Transport, expected: list[paramiko.PKey]) -> None:
        got = t.get_remote_server_key()
        if any(got.get_name() == k.get_name() and got.asbytes() == k.asbytes() for k in expected):
            return
        same_type = [k for k in expected if k.get_name() == got.get_name()]
        named = ", ".join(f"{k.get_name()} {fingerprint(k)}" for k in expected)
        what = "CHANGED" if same_type else "unknown (the testbed names another key type)"
        raise HostKeyError(
            f"{self.where}: host key {what}: the host presents {got.get_name()} {fingerprint(got)}, "
            f"the testbed names {named}; refused.  A changed key means a reinstalled host or "
            f"someone in between: check the key out of band (ssh-keygen -lf on the host) and "
            f"update hosts.{self.name}.ssh.host_key / known_hosts")

    def _login(self, t: paramiko.Transport) -> None:
        path = self.ssh.key_path() if hasattr(self.ssh, "key_path") else None
        if path is None:
            raise SshError(f"hosts.{self.name}.ssh.key: give the private key file to log in "
                           f"with (public-key authentication only)")
        try:
            t.auth_publickey(self.ssh.user, paramiko.PKey.from_path(str(path)))
        except (OSError, paramiko.SSHException, ValueError) as e:
            kind = "was refused" if isinstance(e, paramiko.AuthenticationException) else "cannot be read"
            raise SshError(f"{self.where}: login as {self.ssh.user} failed: the key of "
                           f"hosts.{self.name}.ssh.key {kind} ({type(e).__name__}); put its public "
                           f"half in the user's authorized_keys") from None
        if not t.is_authenticated():
            raise SshError(f"{self.where}: login as {self.ssh.user} was refused")

    def transport(self) -> paramiko.Transport:
        t = self._transport
        if t is None:
            return self.connect().transport()
        if not t.is_active():
            self.check()
        return t

    def lost_reason(self) -> Optional[str]:
        """Why the connection is gone (None while it is up, or before the first connect)."""
        t = self._transport
        if t is None or self._closed:
            return self._lost
        if not t.is_active():
            exc = t.get_exception()
            self._lost = (f"connection to {self.where} lost"
                          + (f" ({type(exc).__name__}{': ' + str(exc) if str(exc) else ''})"
                             if exc else "")
                          + f"; sshd gone, host rebooted or silent for {3 * self.ssh.keepalive_s:g} s")
        return self._lost

    def check(self) -> None:
        """Raise :class:`HostLost` if the connection to this host broke."""
        why = self.lost_reason()
        if why is not None:
            raise HostLost(why)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for f in self._forwards:
                with contextlib.suppress(Exception):
                    f.close()
            if self._sftp is not None:
                with contextlib.suppress(Exception):
                    self._sftp.close()
            if self._transport is not None:
                self._transport.close()

    def __enter__(self) -> "SshHost":
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SshHost({self.name!r}, {self.ssh.address}:{self.ssh.port})"

    # ------------------------------------------------------------------ commands
    @staticmethod
    def command_line(argv: Sequence[str], env: Optional[dict[str, str]] = None,
                     cwd: Optional[Union[str, Path]] = None) -> str:
        """The remote command string: every argument quoted, ``env`` through ``env(1)``."""
        words = [str(a) for a in argv]
        if env:
            words = ["env", *[f"{k}={v}" for k, v in env.items()], *words]
        line = " ".join(shlex.quote(w) for w in words)
        if cwd is not None:
            line = f"cd {shlex.quote(str(cwd))} && exec {line}"
        return line

    def _session(self, timeout: Optional[float] = None) -> paramiko.Channel:
        t = self.transport()
        try:
            return t.open_session(timeout=timeout or float(self.ssh.connect_timeout_s))
        except (paramiko.SSHException, EOFError, OSError) as e:
            self.check()
            raise SshError(f"{self.where}: cannot open a channel ({e})") from None

    def wrap(self, argv: Sequence[str], netns: Optional[str] = None) -> list[str]:
        """The command that runs ``argv`` inside ``netns`` on this host."""
        return netns_argv(netns, argv)

    def run(self, argv: Sequence[str], *, netns: Optional[str] = None, check: bool = True,
            timeout: float = 30.0, input: Optional[str] = None,
            env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None
            ) -> subprocess.CompletedProcess:
        """Run a short command on the host to completion (text output captured); raises
        :class:`CommandError` like :meth:`LocalHost.run`, :class:`HostLost` when the connection
        is gone."""
        cmd = self.wrap(argv, netns)
        chan = self._session()
        out, err = bytearray(), bytearray()
        try:
            chan.exec_command(self.command_line(cmd, env, cwd))
            if input is not None:
                chan.sendall(input.encode())
            chan.shutdown_write()
            deadline = time.monotonic() + timeout
            chan.settimeout(self.RECV_WAIT_S)
            while True:
                if chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if time.monotonic() > deadline:
                    raise CommandError(f"{self.name}: {' '.join(cmd)}: no exit within {timeout:g} s")
                try:
                    data: Optional[bytes] = chan.recv(65536)
                except socket.timeout:
                    data = None
                if data:
                    out += data
                    continue
                if data == b"":
                    # the channel's EOF: the output is complete and the exit status follows.
                    # Wait for it; recv() at EOF returns at once, and looping on it took the
                    # CPU and the GIL from paramiko's reader thread (~0.25 s per command)
                    chan.status_event.wait(self.RECV_WAIT_S)
                if not chan.exit_status_ready() and not self.transport().is_active():
                    break
            if not chan.exit_status_ready():
                self.check()
                raise SshError(f"{self.where}: {' '.join(cmd)}: the channel closed without a status")
            rc = chan.recv_exit_status()
        finally:
            chan.close()
        cp = subprocess.CompletedProcess(cmd, rc, out.decode(errors="replace"),
                                         err.decode(errors="replace"))
        if check and rc != 0:
            raise CommandError(f"{self.name}: {' '.join(cmd)} failed ({rc}): "
                               f"{cp.stderr.strip() or cp.stdout.strip()}", cp)
        return cp

    def agent(self) -> str:
        """The agent script's path on the host (uploaded once per connection)."""
        with self._lock:
            if self._agent is None:
                d = f"{self.work_dir}/agent"
                self.mkdir(d)
                path = f"{d}/{AGENT_NAME}"
                if not self.exists(path):
                    self.write_text(path + ".new", AGENT_SOURCE)
                    self.sftp().posix_rename(path + ".new", path)
                self._agent = path
            return self._agent

    def environment(self, extra: dict[str, str]) -> dict[str, str]:
        """The environment a remote process gets: only ``extra`` (NFVPERF_TAG and the caller's
        own variables), never the controller's environment."""
        return dict(extra)

    def popen(self, cmd: Sequence[str], *, stdin: Stream = None, stdout: Stream = None,
              stderr: Stream = None, env: Optional[dict[str, str]] = None,
              cwd: Optional[Path] = None, start_new_session: bool = False, close_fds: bool = True,
              preexec_fn: Optional[Callable[[], object]] = None) -> RemotePopen:
        """Start ``cmd`` (already wrapped) on the host under the agent's guard; ``stdout`` /
        ``stderr`` are local files its output is copied to (``stderr=STDOUT``: the same file).
        ``stdin`` a file descriptor (the slave of a local pty, :class:`Process` with
        ``interactive=True``): ``cmd`` runs on a terminal of the host (agent ``guard-pty``) whose
        input and output are that pty's.  ``start_new_session``, ``close_fds`` and ``preexec_fn``
        are the local Popen's: the agent's guard always gives the remote command its own process
        group, dying with the connection."""
        console = None
        if isinstance(stdin, int) and stdin >= 0:
            console = os.dup(stdin)
            out = err = None
        else:
            # a descriptor other than a pty's has nothing to copy to (DEVNULL included)
            out = None if stdout is None or isinstance(stdout, int) else stdout
            err = out if stderr == subprocess.STDOUT else \
                (None if stderr is None or isinstance(stderr, int) else stderr)
        mode = "guard" if console is None else "guard-pty"
        line = self.command_line(["python3", self.agent(), mode, *cmd], env, cwd)
        try:
            chan = self._session()
        except BaseException:
            if console is not None:
                os.close(console)
            raise
        try:
            chan.exec_command(line)
            return RemotePopen(self, chan, out, err, console=console)
        except BaseException:
            chan.close()
            if console is not None:
                with contextlib.suppress(OSError):
                    os.close(console)
            raise

    def spawn(self, argv: Sequence[str], *, name: str, run: Optional[RunContext] = None,
              tracker: Optional[ResourceTracker] = None, **kw: Unpack[ProcessOptions]) -> Process:
        """Start a :class:`Process` on this host (see its arguments) and return it."""
        return Process(name, argv, run, tracker, host=self, **kw).start()

    def killpg(self, pid: int, sig: int) -> None:
        """Signal the remote process group ``pid`` (nothing when the host is gone)."""
        if self.lost_reason() is not None or self._closed:
            return
        with contextlib.suppress(CommandError, SshError, HostLost):
            self.run(["kill", f"-{int(sig)}", "--", f"-{int(pid)}"], check=False, timeout=10)

    def cleanup_tag(self, tag: str, dry_run: bool = False) -> dict[str, object]:
        """What run ``tag`` left on this host, removed (``dry_run``: only listed)."""
        argv = ["python3", self.agent(), "cleanup", tag, "--work-dir", self.work_dir] + \
            (["--dry-run"] if dry_run else [])
        return json.loads(self.run(argv, timeout=60).stdout)

    def tags(self) -> list[str]:
        """Run tags present on this host (processes, namespaces, links)."""
        return list(json.loads(self.run(["python3", self.agent(), "tags"], timeout=30).stdout))

    def preflight(self, needs: PreflightNeeds) -> list[dict[str, object]]:
        """:func:`nfvperf.host.preflight.run_checks` on this host: the check modules are
        uploaded as a zip (stdlib only) and run with the host's python3.  ``needs``:
        ``{"binaries": [{name, package, candidates, env, required}], "pci": [...],
        "required": [...]}``; returns the checks as dicts."""
        with self._lock:
            d = f"{self.work_dir}/agent"
            self.mkdir(d)
            path = f"{d}/{BUNDLE_NAME}"
            if not self.exists(path):
                with self.sftp().open(path + ".new", "wb") as f:
                    f.write(bundle())
                self.sftp().posix_rename(path + ".new", path)
        cp = self.run(["python3", "-c", SCRIPT, path, json.dumps(needs)], timeout=60)
        return list(json.loads(cp.stdout))

    # ------------------------------------------------------------------ files
    def sftp(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is None:
                try:
                    self._sftp = self.transport().open_sftp_client()
                except (paramiko.SSHException, EOFError, OSError) as e:
                    self.check()
                    raise SshError(f"{self.where}: no SFTP ({e}); enable the sftp subsystem "
                                   f"in sshd_config") from None
                if self._sftp is None:
                    raise SshError(f"{self.where}: no SFTP subsystem")
            return self._sftp

    def exists(self, path: Union[str, Path]) -> bool:
        try:
            self.sftp().lstat(str(path))
            return True
        except FileNotFoundError:
            return False
        except OSError:
            self.check()
            return False

    def read_text(self, path: Union[str, Path]) -> str:
        with self.sftp().open(str(path), "r") as f:
            return f.read().decode(errors="replace")

    def write_text(self, path: Union[str, Path], text: str, mode: int = 0o644) -> None:
        with self.sftp().open(str(path), "w") as f:
            f.write(text.encode())
        self.sftp().chmod(str(path), mode)

    def mkdir(self, path: Union[str, Path], mode: int = 0o755) -> None:
        """``mkdir -p``."""
        p = str(path)
        if self.exists(p):
            return
        parent = os.path.dirname(p.rstrip("/"))
        if parent and parent != p:
            self.mkdir(parent, mode)
        with contextlib.suppress(OSError):
            self.sftp().mkdir(p, mode)
        if not self.exists(p):
            raise SshError(f"{self.where}: cannot create {p}")

    def remove(self, path: Union[str, Path]) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.sftp().remove(str(path))

    def rmtree(self, path: Union[str, Path]) -> None:
        self.run(["rm", "-rf", "--", str(path)], check=False)

    def glob(self, directory: Union[str, Path], pattern: str) -> list[str]:
        try:
            names = self.sftp().listdir(str(directory))
        except FileNotFoundError:
            return []
        return sorted(f"{directory}/{n}" for n in names if fnmatch.fnmatch(n, pattern))

    def put(self, local: Union[str, Path], remote: Union[str, Path]) -> None:
        self.sftp().put(str(local), str(remote))

    def get(self, remote: Union[str, Path], local: Union[str, Path]) -> None:
        self.sftp().get(str(remote), str(local))

    # ------------------------------------------------------------------ connections
    def connect_unix(self, path: Union[str, Path], timeout: float = 10.0) -> paramiko.Channel:
        """A socket-like channel (``sendall``/``recv``/``settimeout``/``close``) connected to
        the Unix socket ``path`` on the host, through the agent's relay."""
        chan = self._session(timeout)
        chan.exec_command(self.command_line(["python3", self.agent(), "relay", str(path)]))
        return chan

    def open_tcp(self, port: int, address: str = "127.0.0.1", timeout: float = 10.0
                 ) -> paramiko.Channel:
        """A socket-like channel to ``address:port`` as seen from the host (direct-tcpip)."""
        try:
            return self.transport().open_channel("direct-tcpip", (address, port), ("127.0.0.1", 0),
                                                 timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            self.check()
            raise SshError(f"{self.where}: cannot forward to {address}:{port} ({e})") from None

    def forward(self, port: int, address: str = "127.0.0.1") -> "LocalForward":
        """Listen on a free port of the controller's 127.0.0.1 and forward every connection to
        ``address:port`` as seen from the host.  ``.port`` is the local port; closed with the
        host."""
        fw = LocalForward(self, address, port)
        self._forwards.append(fw)
        return fw


class LocalForward:
    """A local TCP listener whose connections go to a port on an :class:`SshHost`."""

    def __init__(self, host: SshHost, address: str, port: int):
        self.host, self.address, self.remote_port = host, address, port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, name=f"fwd-{host.name}-{port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                chan = self.host.open_tcp(self.remote_port, self.address)
            except Exception:  # noqa: BLE001
                conn.close()
                continue
            for a, b in ((conn, chan), (chan, conn)):
                threading.Thread(target=self._copy, args=(a, b), daemon=True).start()

    @staticmethod
    def _copy(src: Union[socket.socket, paramiko.Channel], dst: Union[socket.socket, paramiko.Channel]) -> None:
        try:
            with contextlib.suppress(Exception):
                while data := src.recv(65536):
                    dst.sendall(data)
        finally:
            with contextlib.suppress(Exception):
                dst.close()
            with contextlib.suppress(Exception):
                src.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.sock.close()


def _conforms(h: SshHost) -> Host:
    """mypy checks here that SshHost implements :class:`nfvperf.host.base.Host`."""
    return h

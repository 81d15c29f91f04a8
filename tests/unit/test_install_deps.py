"""Every external program the code, the tests, the benchmarks and tgen's scripts run comes from a
Debian package that ``scripts/install-deps.sh`` installs (issue 7: CI was green only where
``ethtool`` happened to be present).

The scan finds program names in three places:

* Python: the first string of an argument list given to a subprocess-style call (``run``,
  ``Popen``, ``check_output``, ``run_in_netns``, ``spawn`` ...), also behind a ``prefix + [...]``,
  and the argument of ``shutil.which(...)`` / ``find_binary(...)`` (string or module constant);
* shell scripts: words in command position;
* the Makefile's recipe lines and ``.ci/run``.

Each name must be in :data:`PROGRAM_PACKAGES` (program -> Debian package), and that package must be
in install-deps' ``APT_PKGS`` or part of the base system.  A new program makes this test fail until
both are added; removing a package from install-deps makes it fail too.  Where the program is
present here, ``dpkg -S`` checks that the map names the package that really ships it.
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: program -> the Debian package that ships it
PROGRAM_PACKAGES = {
    "apt-cache": "apt", "apt-get": "apt",
    "bash": "bash", "sh": "dash", "cat": "coreutils", "true": "coreutils", "false": "coreutils", "sleep": "coreutils", "stdbuf": "coreutils",
    "timeout": "coreutils", "seq": "coreutils", "rm": "coreutils", "sort": "coreutils", "uniq": "coreutils",
    "head": "coreutils", "id": "coreutils", "touch": "coreutils", "wc": "coreutils", "dirname": "coreutils", "pwd": "coreutils",
    "sed": "sed", "grep": "grep",
    "dpkg-deb": "dpkg", "dpkg-query": "dpkg", "dpkg": "dpkg",
    "mount": "mount", "runuser": "util-linux", "taskset": "util-linux",
    "ip": "iproute2", "bridge": "iproute2", "tc": "iproute2",
    "sysctl": "procps", "pgrep": "procps",
    "ethtool": "ethtool", "modprobe": "kmod",
    "pkg-config": "pkgconf", "debconf-set-selections": "debconf",
    "meson": "meson", "ninja": "ninja-build", "make": "make", "cc": "gcc",
    "python3": "python3",
    "dpdk-testpmd": "dpdk-dev",
    "ovs-vsctl": "openvswitch-switch", "ovs-appctl": "openvswitch-common",
    "ovs-ofctl": "openvswitch-common", "ovsdb-tool": "openvswitch-common",
    "ovsdb-server": "openvswitch-common", "ovs-vswitchd": "openvswitch-switch",
    "ovs-vswitchd-dpdk": "openvswitch-switch-dpdk",
    "iperf3": "iperf3",
    "tshark": "tshark",
    "qemu-system-x86_64": "qemu-system-x86",
    "initdb": "postgresql", "pg_ctl": "postgresql",
    "chromium": "chromium", "chromedriver": "chromium-driver",
    "sshd": "openssh-server", "ssh-keygen": "openssh-client", "kill": "procps", "printf": "coreutils",
    "socat": "socat", "patch": "patch",
    "cp": "coreutils", "mkdir": "coreutils", "realpath": "coreutils",
}

#: always present on Debian (Essential: yes, or apt itself, which installs everything else)
BASE_SYSTEM = {"apt", "bash", "dash", "debconf", "coreutils", "dpkg", "grep", "mount", "sed", "util-linux"}

#: built by this project, not installed from a package
BUILT_HERE = {"tgen"}

_CALLS = {"run", "Popen", "check_output", "check_call", "call", "run_in_netns", "_run", "netns_argv",
          "spawn", "_spawn", "Process", "run_version", "execvp", "run_cmd"}
_WHICH = {"which", "find_binary"}
_SH_SKIP = {"set", "cd", "echo", "exit", "trap", "wait", "for", "do", "done", "if", "then", "fi",
            "else", "elif", "while", "case", "esac", "return", "local", "export", "shift", "true",
            "false", "read", "printf", "source", "test", "[", "[[", "cleanup", "command", "exec",
            "continue", "break", "in", "kill", "eval", "function", "{", "}", "!"}


def apt_packages() -> set[str]:
    text = (ROOT / "scripts" / "install-deps.sh").read_text()
    m = re.search(r"APT_PKGS=\(([^)]*)\)", text)
    assert m, "scripts/install-deps.sh: no APT_PKGS=( ... ) list"
    return set(m.group(1).split())


def _name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _module_strings(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node.value.value
    return out


def python_programs(path: Path) -> dict[str, str]:
    """{program: "file:line"} for one Python file."""
    tree = ast.parse(path.read_text(), str(path))
    consts = _module_strings(tree)
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    found: dict[str, str] = {}

    def add(name: str, node: ast.AST) -> None:
        if re.fullmatch(r"[A-Za-z][\w.+-]*", name):
            found.setdefault(name, f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            child, par = node, parents.get(node)
            while isinstance(par, (ast.BinOp, ast.Starred, ast.IfExp)):
                # ``prefix_fn(ns) + ["prog", ...]`` runs prog; ``ip + ["link", ...]`` runs ip's
                # subcommand, so a literal right of a plain name is not a program
                if isinstance(par, ast.BinOp) and par.right is child and not isinstance(par.left, ast.Call):
                    break
                child, par = par, parents.get(par)
            else:
                if isinstance(par, ast.Call) and _name(par.func) in _CALLS:
                    add(first.value, node)
                elif isinstance(par, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id in ("argv", "cmd", "args", "command", "pin", "pre", "prefix")
                        for t in par.targets):
                    add(first.value, node)
        elif isinstance(node, ast.Call) and _name(node.func) in _WHICH and node.args:
            a = node.args[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                add(a.value, node)
            elif isinstance(a, ast.Name) and a.id in consts:
                add(consts[a.id], node)
    return found


def shell_programs(path: Path, text: str | None = None) -> dict[str, str]:
    """{program: "file:line"}: words in command position of a shell script (or recipe lines)."""
    found: dict[str, str] = {}
    text = path.read_text() if text is None else text
    heredoc: str | None = None
    in_array = False
    for no, line in enumerate(text.splitlines(), 1):
        if heredoc is not None:                  # a here-document is data (or another language)
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if in_array:                              # continuation lines of NAME=( ... )
            in_array = ")" not in line
            continue
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if m:
            heredoc = m.group(1)
            line = line[:m.start()]
        line = re.sub(r"'[^']*'", "''", line)     # single-quoted text is never a command
        line = re.sub(r'"(?:[^"\\$]|\\.|\$(?!\())*"', '""', line)   # nor double-quoted without $( )
        line = re.sub(r"(^|\s)#.*", "", line)
        if re.search(r"\w=\($", line.strip()) or (re.search(r"\w=\(", line) and ")" not in line):
            in_array = True
            continue
        line = re.sub(r"\w+=\([^)]*\)", "", line)
        for part in re.split(r"\|\||&&|[|;&]|\$\(|`|\bthen\b|\bdo\b|\belse\b", line):
            words = part.split()
            while words and (re.fullmatch(r"\w+=\S*", words[0]) or words[0] in ("exec", "!", "command")):
                words = words[1:]
            # prefixes that run another program: timeout N ..., ip netns exec NS ...
            while True:
                if len(words) > 2 and words[0] == "timeout":
                    found.setdefault("timeout", f"{path.relative_to(ROOT)}:{no}")
                    words = words[2:]
                elif words[:3] == ["ip", "netns", "exec"] and len(words) > 4:
                    found.setdefault("ip", f"{path.relative_to(ROOT)}:{no}")
                    words = words[4:]
                else:
                    break
            if not words:
                continue
            w = words[0].strip("\"'()")
            if w in _SH_SKIP or not re.fullmatch(r"[a-z][\w.+-]*", w) or w.endswith("()"):
                continue
            found.setdefault(w, f"{path.relative_to(ROOT)}:{no}")
    return found


def all_programs() -> dict[str, str]:
    progs: dict[str, str] = {}
    for top in ("src", "tests", "bench", "tgen/tests", "scripts"):
        for f in sorted((ROOT / top).rglob("*.py")):
            for k, v in python_programs(f).items():
                progs.setdefault(k, v)
        for f in sorted((ROOT / top).rglob("*.sh")):
            for k, v in shell_programs(f).items():
                progs.setdefault(k, v)
    make = ROOT / "Makefile"
    recipes = "\n".join(ln[1:] for ln in make.read_text().splitlines() if ln.startswith("\t"))
    recipes = re.sub(r"\$\((\w+)\)", lambda m: {"PY": "python3"}.get(m.group(1), m.group(1)), recipes)
    for k, v in shell_programs(make, recipes).items():
        progs.setdefault(k, v)
    for k, v in shell_programs(ROOT / ".ci" / "run").items():
        progs.setdefault(k, v)
    return progs


def test_scan_finds_the_programs_we_know_we_call():
    """The scanner itself works: it sees ethtool (tg/iperf3), ip, ovs-vsctl, tshark, iperf3 ..."""
    progs = all_programs()
    for p in ("ethtool", "taskset", "ip", "ovs-vsctl", "ovs-ofctl", "ovsdb-server", "dpdk-testpmd", "tshark",
              "iperf3", "qemu-system-x86_64", "meson", "sysctl"):
        assert p in progs, f"the scan no longer finds {p}: {sorted(progs)}"


def test_scan_python_and_shell_forms(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    py = tmp_path / "x.py"
    py.write_text("import shutil, subprocess\nQ = 'qprog'\n"
                  "subprocess.run(['aprog', '-x'])\nrun_in_netns(ns, prefix_of(ns) + ['bprog'])\n"
                  "subprocess.run(ip + ['link', 'set'])\npin = ['tprog', '-c'] if cpu else []\n"
                  "shutil.which(Q)\nlabels = ['notaprog', 'x']\n")
    assert set(python_programs(py)) == {"aprog", "bprog", "qprog", "tprog"}
    sh = tmp_path / "x.sh"
    sh.write_text("set -u\nNS=x$$\nip netns exec \"$NS\" timeout 5 cprog -a | dprog\n"
                  "X=$(eprog 1)  # fprog\nfor p in a; do gprog; done\n")
    assert set(shell_programs(sh)) == {"ip", "timeout", "cprog", "dprog", "eprog", "gprog"}


def test_every_program_comes_from_a_package_install_deps_installs():
    pkgs = apt_packages() | BASE_SYSTEM
    unknown, missing = [], []
    for prog, where in sorted(all_programs().items()):
        if prog in BUILT_HERE:
            continue
        pkg = PROGRAM_PACKAGES.get(prog)
        if pkg is None:
            unknown.append(f"{prog} (called at {where})")
        elif pkg not in pkgs:
            missing.append(f"{prog} from Debian package {pkg} (called at {where})")
    assert not unknown, ("programs called but not in PROGRAM_PACKAGES of tests/unit/test_install_deps.py: "
                         + "; ".join(unknown) + " — add each with its Debian package, and the package to "
                         "APT_PKGS in scripts/install-deps.sh")
    assert not missing, ("scripts/install-deps.sh does not install: " + "; ".join(missing)
                         + " — add the package to APT_PKGS")


def _dpkg_owner(path: str) -> set[str]:
    cands = [path, str(Path(path).resolve())]
    cands += [c[4:] for c in cands if c.startswith("/usr/")]     # merged /usr: dpkg may list /bin/x
    for c in cands:
        cp = subprocess.run(["dpkg", "-S", c], capture_output=True, text=True, check=False)
        if cp.returncode == 0:
            return {ln.split(":")[0].strip() for ln in cp.stdout.splitlines() if ":" in ln}
    return set()


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="not a Debian system")
def test_the_package_map_is_true_here():
    """Where a mapped program is installed, the package that ships it is the one the map names."""
    wrong = []
    for prog, pkg in sorted(PROGRAM_PACKAGES.items()):
        path = shutil.which(prog)
        if prog in ("initdb", "pg_ctl"):
            path = path or next((str(p) for p in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{prog}"))), None)
        if not path:
            continue
        owners = _dpkg_owner(path)
        if prog in ("initdb", "pg_ctl"):
            owners = {"postgresql" for o in owners if o.startswith("postgresql-")} or owners
        if prog == "cc":
            owners = {"gcc" for o in owners if o.startswith(("gcc", "cpp"))} or owners | {"gcc"}
        if prog == "python3":
            owners = {"python3" for o in owners if o.startswith("python3")} or owners | {"python3"}
        if owners and pkg not in owners:
            wrong.append(f"{prog}: map says {pkg}, dpkg -S says {sorted(owners)}")
    assert not wrong, "; ".join(wrong)

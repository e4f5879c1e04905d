"""mcclrun (python -m mccl.run): start the ranks of an MCCL job, here or
on other hosts.

    mcclrun -n 4 python3 train.py            # 4 ranks on this host
    mcclrun --hosts a,b -N 2 prog args...    # 2 ranks on each of a and b

Each rank gets MCCL_JOB (a fresh name unless --job), MCCL_RANK and
MCCL_NRANKS, and torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT; ranks that share a host
get OMP_NUM_THREADS=1 unless it is set, as under torchrun.  Every line a rank prints is prefixed with its rank; stdin
goes to rank 0; SIGINT, SIGTERM and SIGHUP go to every rank.  When a rank
fails, the others are stopped and mcclrun exits with the failed rank's
status, saying which rank failed and how.  Before it starts anything it
checks that each host's daemon answers (mcclctl status), and names the
host whose daemon does not.  See mcclrun(1).
"""

import argparse
import json
import os
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

STOP_GRACE_S = 3	# SIGTERM, then SIGKILL after this long
# When a rank fails the others usually fail too, at once, with MCCL's
# message saying why: they get this long to say it and end by themselves.
FAIL_WAIT_S = 1

# Runs on a remote host in front of its rank (python3 -c), so that the rank
# ends with its launcher.  ssh without a tty runs the command in a session
# of its own: when the ssh client dies, nothing signals the command; sshd
# only closes the pipes it relayed, which poll() on our stdout reports as
# an error or hang-up.  Then the rank's process group gets SIGTERM, and
# SIGKILL after the grace.  Signals sent to the wrapper go to the rank.
REMOTE_WRAPPER = r"""
import os, select, signal, subprocess, sys, time
rank = subprocess.Popen(sys.argv[2:], preexec_fn=os.setpgrp)
def send(sig, frame=None):
    try:
        os.killpg(rank.pid, sig)
    except ProcessLookupError:
        pass
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, send)
watch = select.poll()
watch.register(1, 0)
try:
    watch.register(os.pidfd_open(rank.pid), select.POLLIN)
    tick = None
except (AttributeError, OSError):
    tick = 200
gone = select.POLLERR | select.POLLHUP
while rank.poll() is None:
    if any(fd == 1 and ev & gone for fd, ev in watch.poll(tick)):
        send(signal.SIGTERM)
        end = time.monotonic() + float(sys.argv[1])
        while rank.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        send(signal.SIGKILL)
        break
status = rank.wait()
sys.exit(status if status >= 0 else 128 - status)
"""


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="mcclrun", description="Start the ranks of an MCCL job.")
    p.add_argument("-n", "--np", type=int, dest="n",
                   help="ranks in all (default: hosts x ranks per host)")
    p.add_argument("-N", "--per-host", type=int, default=None,
                   help="ranks on each host (default: 1 with --hosts)")
    p.add_argument("--hosts", help="comma-separated hosts to spread "
                   "ranks over (through --ssh)")
    p.add_argument("--hostfile", help="hosts, one a line as Open MPI's "
                   "(\"host slots=N\") or MPICH's (\"host:N\"), or a JSON "
                   "list (strings, or objects with \"host\" and optional "
                   "\"ranks\")")
    p.add_argument("--ssh", default="ssh",
                   help="the command that runs a command on a host, given "
                   "the host and the command (default: ssh)")
    p.add_argument("--job", help="the job name (default: a fresh one)")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="set K=V for every rank (repeatable)")
    p.add_argument("--socket", help="MCCL_SOCKET for every rank")
    p.add_argument("--master-addr", help="MASTER_ADDR for torch.distributed "
                   "(default: rank 0's host, or 127.0.0.1 here)")
    p.add_argument("--master-port", type=int, help="MASTER_PORT (default: "
                   "one from the job name, 20000 to 29999)")
    p.add_argument("--mcclctl", default=os.environ.get("MCCLCTL"),
                   help="the mcclctl to check daemons with (default: "
                   "MCCLCTL, else beside mcclrun, in the build tree, or on "
                   "PATH; on other hosts, mcclctl from their PATH)")
    p.add_argument("--no-check", action="store_true",
                   help="do not check the daemons before starting")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if not a.command:
        p.error("no command to run")
    if a.command[0] == "--":
        a.command = a.command[1:]
    for kv in a.env:
        if "=" not in kv or kv.startswith("="):
            p.error("--env %r: expected K=V" % kv)
    return a, p


def read_hostfile(path):
    """[(host, ranks or None)] from a JSON list of hosts (strings, or
    objects with "host" and optional "ranks"), or from Open MPI's and
    MPICH's text form: a host a line, with "slots=N" (or ":N") for its
    ranks, "#" comments."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise SystemExit("mcclrun: hostfile %s: %s" % (path, e))
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SystemExit("mcclrun: hostfile %s: %s" % (path, e))
        hosts = json_hosts(path, data)
    else:
        hosts = text_hosts(path, text)
    if not hosts:
        raise SystemExit("mcclrun: hostfile %s: no hosts in it" % path)
    return hosts


def json_hosts(path, data):
    if not isinstance(data, list):
        raise SystemExit("mcclrun: hostfile %s: expected a JSON list of "
                         "hosts" % path)
    hosts = []
    for h in data:
        name = h if isinstance(h, str) else \
            h.get("host") if isinstance(h, dict) else None
        if name == "":
            raise SystemExit("mcclrun: hostfile %s: an empty host name" %
                             path)
        if isinstance(h, str):
            hosts.append((h, None))
        elif isinstance(name, str):
            r = h.get("ranks")
            # bool is an int to Python: "ranks": true is no count
            if r is not None and (type(r) is not int or r < 1):
                raise SystemExit("mcclrun: hostfile %s: host %s: \"ranks\" "
                                 "must be a positive integer" %
                                 (path, h["host"]))
            hosts.append((h["host"], r))
        else:
            raise SystemExit("mcclrun: hostfile %s: %r is not a host" %
                             (path, h))
    return hosts


def text_hosts(path, text):
    """Open MPI's "host slots=N [max_slots=M]" lines, MPICH's "host:N"."""
    hosts = []
    for no, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        name, slots = words[0], None
        if ":" in name and name.count(":") == 1:
            name, slots = name.split(":")
        for w in words[1:]:
            key, _, value = w.partition("=")
            if key == "slots":
                slots = value
            elif key not in ("max_slots", "max-slots"):
                raise SystemExit("mcclrun: hostfile %s, line %d: %r: "
                                 "expected slots=N" % (path, no, w))
        if slots is not None and (not slots.isdigit() or int(slots) < 1):
            raise SystemExit("mcclrun: hostfile %s, line %d: slots %r: "
                             "expected a positive integer" %
                             (path, no, slots))
        hosts.append((name, int(slots) if slots is not None else None))
    return hosts


def placement(a, p):
    """[(host or None, rank)] for every rank; None: this host, no ssh."""
    if a.hosts and a.hostfile:
        p.error("--hosts and --hostfile exclude each other")
    if a.hostfile:
        hosts = read_hostfile(a.hostfile)
    elif a.hosts:
        hosts = [(h, None) for h in a.hosts.split(",")]
        if "" in (h for h, _ in hosts):
            p.error("--hosts %r: an empty host name" % a.hosts)
    else:
        n = a.n if a.n is not None else a.per_host
        if n is None or n < 1:
            p.error("say how many ranks: -n N")
        return [(None, r) for r in range(n)]
    per = [r if r is not None else (a.per_host or 1) for _, r in hosts]
    slots = [h for (h, _), k in zip(hosts, per) for _ in range(k)]
    n = a.n if a.n is not None else len(slots)
    if n < 1 or n > len(slots):
        p.error("-n %d: the hosts have %d slots" % (n, len(slots)))
    return [(slots[r], r) for r in range(n)]


def package_path():
    """The folder holding the mccl package this launcher runs, when it is
    not one the interpreter finds by itself (a build tree's): the ranks get
    it on PYTHONPATH, so that `import mccl` finds the same package."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    site = [os.path.abspath(p) for p in sys.path[1:] if p]
    return None if here in site and os.path.basename(here) in (
        "site-packages", "dist-packages") else here


def master_addr(a, places):
    """MASTER_ADDR: --master-addr, else rank 0's host (127.0.0.1 here),
    which must resolve here, or torch's rendezvous waits 30 minutes for a
    name nobody answers to."""
    if a.master_addr:
        return a.master_addr
    host = places[0][0] or "127.0.0.1"
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        raise SystemExit("mcclrun: rank 0's host %r does not resolve, so it "
                         "cannot be torch.distributed's MASTER_ADDR: give "
                         "--master-addr ADDR (an address of rank 0's host)"
                         % host)
    return host


def rank_env(a, job, places, rank, master=None):
    """MCCL's variables, and torchrun's, so that torch.distributed's env://
    rendezvous (dist.init_process_group("mccl")) works as under torchrun."""
    host = places[rank][0]
    local = [r for h, r in places if h == host]
    env = {"MCCL_JOB": job, "MCCL_RANK": str(rank),
           "MCCL_NRANKS": str(len(places)), "RANK": str(rank),
           "WORLD_SIZE": str(len(places)),
           "LOCAL_RANK": str(local.index(rank)),
           "LOCAL_WORLD_SIZE": str(len(local)),
           "MASTER_ADDR": master or master_addr(a, places),
           "MASTER_PORT": str(a.master_port or 20000 +
                              int(job.encode().hex(), 16) % 10000)}
    tree = package_path()
    if tree is not None:
        old = os.environ.get("PYTHONPATH") if host is None else None
        env["PYTHONPATH"] = tree + (os.pathsep + old if old else "")
    if a.socket:
        env["MCCL_SOCKET"] = a.socket
    if len(local) > 1 and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = "1"	# see threads_note
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    return env


def threads_note(envs):
    """Ranks that share a host each get OMP_NUM_THREADS=1 unless it is
    set, as torchrun does: with one OpenMP thread per core in every rank,
    torch's parallel copies and kernels (from 32768 elements) stall for
    tens of milliseconds each on an oversubscribed host."""
    if any(e.get("OMP_NUM_THREADS") == "1" for e in envs) and \
            "OMP_NUM_THREADS" not in os.environ:
        sys.stderr.write("mcclrun: OMP_NUM_THREADS=1 for ranks that share a "
                         "host (set it, or --env, to choose)\n")


def remote(a, host, env, command, wrap=True):
    """The argv that runs command with env on host through --ssh; wrapped,
    it ends when the connection does (REMOTE_WRAPPER)."""
    if wrap:
        command = ["python3", "-c", REMOTE_WRAPPER, str(STOP_GRACE_S)] + \
            list(command)
    line = "env " + " ".join(shlex.quote("%s=%s" % kv) for kv in
                             env.items()) + " " + \
        " ".join(shlex.quote(c) for c in command)
    return shlex.split(a.ssh) + [host, line]


def local_mcclctl(a):
    """This host's mcclctl: --mcclctl or MCCLCTL, else beside the launcher,
    in a build tree (../build from the launcher, or the one this package
    lies in), in the package (a wheel carries one), else from PATH;
    SystemExit naming every place tried."""
    if a.mcclctl:
        return a.mcclctl
    launcher = os.path.dirname(os.path.realpath(sys.argv[0]))
    package = os.path.dirname(os.path.abspath(__file__))
    tried = []
    for place in (launcher, os.path.join(launcher, "..", "build"),
                  os.path.join(package, "..", "..", "..", "build"),
                  package):		# a wheel's (setup.py)
        path = os.path.normpath(os.path.join(place, "mcclctl"))
        if path in tried:
            continue
        tried.append(path)
        if os.access(path, os.X_OK) and os.path.isfile(path):
            return path
    found = shutil.which("mcclctl")
    if found:
        return found
    raise SystemExit("mcclrun: no mcclctl to check the daemons with: tried "
                     "%s and PATH; give --mcclctl PATH (or MCCLCTL), or "
                     "--no-check" % ", ".join(tried))


def check_daemons(a, hosts):
    """Every host's daemon must answer before anything starts."""
    for host in hosts:
        ctl = [local_mcclctl(a) if host is None else a.mcclctl or
               "mcclctl"] + (["-s", a.socket] if a.socket else []) + \
            ["-t", "3000", "status"]
        argv = ctl if host is None else remote(a, host, {}, ctl, wrap=False)
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=15)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "%s: %s" % (host or "this host", e)
        if r.returncode != 0:
            why = (r.stderr or r.stdout).strip().splitlines()
            return "the daemon on %s does not answer: %s" % (
                host or "this host", why[-1] if why else
                "mcclctl exited %d" % r.returncode)
    return None


class Rank:
    def __init__(self, rank, proc):
        self.rank = rank
        self.proc = proc
        self.partial = {proc.stdout: b"", proc.stderr: b""}


def describe(status):
    if status < 0:
        try:
            return "was killed by %s" % signal.Signals(-status).name
        except ValueError:
            return "was killed by signal %d" % -status
    return "exited with status %d" % status


class Launcher:
    def __init__(self, ranks):
        self.ranks = ranks
        self.sel = selectors.DefaultSelector()
        self.width = len(str(len(ranks) - 1))
        for r in ranks:
            self.sel.register(r.proc.stdout, selectors.EVENT_READ, (r, 1))
            self.sel.register(r.proc.stderr, selectors.EVENT_READ, (r, 2))
        self.stdin_fd = None
        if ranks[0].proc.stdin is not None:
            try:
                self.stdin_fd = sys.stdin.fileno()
                self.sel.register(self.stdin_fd, selectors.EVENT_READ, None)
            except (OSError, ValueError):
                self.stdin_fd = None
                ranks[0].proc.stdin.close()

    def out(self, r, which, data):
        stream = sys.stdout.buffer if which == 1 else sys.stderr.buffer
        prefix = ("[%*d] " % (self.width, r.rank)).encode()
        stream.write(b"".join(prefix + line for line in
                              data.splitlines(keepends=True)))
        stream.flush()

    def pump(self, timeout):
        for key, _ in self.sel.select(timeout):
            if key.data is None:
                self.forward_stdin()
                continue
            r, which = key.data
            data = os.read(key.fd, 65536)
            f = key.fileobj
            if not data:
                self.sel.unregister(f)
                if r.partial[f]:
                    self.out(r, which, r.partial[f] + b"\n")
                r.partial[f] = b""
                continue
            data = r.partial[f] + data
            cut = data.rfind(b"\n") + 1
            r.partial[f] = data[cut:]
            if cut:
                self.out(r, which, data[:cut])

    def forward_stdin(self):
        data = os.read(self.stdin_fd, 65536)
        dst = self.ranks[0].proc.stdin
        if not data:
            self.sel.unregister(self.stdin_fd)
            dst.close()
            return
        try:
            dst.write(data)
            dst.flush()
        except (BrokenPipeError, ValueError):
            self.sel.unregister(self.stdin_fd)

    def signal_all(self, sig, groups=False):
        """sig to every rank still running; with groups, to every rank's
        process group, whose other members may outlive the rank."""
        for r in self.ranks:
            if groups or r.proc.poll() is None:
                try:
                    os.killpg(r.proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def stop_others(self):
        deadline = time.monotonic() + FAIL_WAIT_S
        while any(r.proc.poll() is None for r in self.ranks) and \
                time.monotonic() < deadline:
            self.pump(0.05)
        self.signal_all(signal.SIGTERM, groups=True)
        deadline = time.monotonic() + STOP_GRACE_S
        while any(r.proc.poll() is None for r in self.ranks) and \
                time.monotonic() < deadline:
            self.pump(0.05)
        self.signal_all(signal.SIGKILL, groups=True)
        for r in self.ranks:
            r.proc.wait()

    def run(self):
        """The first failure's status, or 0 when every rank exits 0."""
        failed = None
        while failed is None:
            self.pump(0.1)
            live = 0
            for r in self.ranks:
                st = r.proc.poll()
                if st is None:
                    live += 1
                elif st != 0:
                    failed = (r, st)
                    break
            if failed is None and live == 0:
                break
        if failed is not None:
            r, st = failed
            sys.stderr.write("mcclrun: rank %d %s; stopping the other "
                             "ranks\n" % (r.rank, describe(st)))
            self.stop_others()
        # What the ranks left in their pipes; a child of a rank that
        # keeps one open does not hold mcclrun.
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(
                k.data is not None for k in self.sel.get_map().values()):
            self.pump(0.05)
        if failed is None:
            return 0
        st = failed[1]
        return st if st > 0 else 128 - st


def main(argv):
    a, p = parse_args(argv)
    places = placement(a, p)
    job = a.job or "mcclrun-" + uuid.uuid4().hex[:16]
    if not a.no_check:
        why = check_daemons(a, sorted({h for h, _ in places},
                                      key=lambda h: h or ""))
        if why is not None:
            sys.stderr.write("mcclrun: %s; nothing started\n" % why)
            return 2
    ranks = []
    master = master_addr(a, places)
    envs = [rank_env(a, job, places, rank, master) for _, rank in places]
    threads_note(envs)
    for (host, rank), env in zip(places, envs):
        if host is None:
            argv_r, env_r = a.command, dict(os.environ, **env)
        else:
            argv_r, env_r = remote(a, host, env, a.command), None
        try:
            proc = subprocess.Popen(
                argv_r, env=env_r, start_new_session=True,
                stdin=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            sys.stderr.write("mcclrun: rank %d: cannot start %s: %s\n" %
                             (rank, argv_r[0], e.strerror))
            launcher = Launcher(ranks) if ranks else None
            if launcher:
                launcher.stop_others()
            return 127
        ranks.append(Rank(rank, proc))
    launcher = Launcher(ranks)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: launcher.signal_all(s))
    return launcher.run()


def run():
    """The console entry point (mcclrun, python -m mccl.run)."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    run()

# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
"""The system tier: the smha .deb installed with apt into a booted Debian 12.

A minbase Debian 12 root is debootstrapped once from Debian's mirror and cached
(SMHA_SYSTEM_CACHE, default /var/cache/smha-system-test/root) with the .debs smha
depends on pre-downloaded into its apt archive, so a warm run needs no network.
Each container boots an overlay of that root (the cache stays pristine) with
systemd-nspawn --boot; commands run inside through nsenter. The containers share
the host's network namespace, so ibsim (started here, its own IBSIM_SOCKNAME)
is reachable through libumad2sim, which the cached root carries (libumad2sim0).

The only change made to the shipped unit is a drop-in with the umad2sim
environment (with the test bed's umad timeout shim, SMHA_UMAD_TIMEOUT_SHIM,
copied into the container) and a WorkingDirectory=. Everything started here (ibsim, nspawn and
the container's PID 1, host-side query tools) is stopped by PID, also on failure.
"""
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CACHE = os.environ.get("SMHA_SYSTEM_CACHE", "/var/cache/smha-system-test")
MIRROR = os.environ.get("SMHA_SYSTEM_MIRROR", "http://deb.debian.org/debian")
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
# The build's umad timeout shim (tests/ibsim/shim/umad_timeout_shim.c): under
# umad2sim an SMP nobody answers never completes, and OpenSM's sweeper waits
# for it forever (a master that queried a standby's SMInfo while that SM was
# starting then never swept, nor dumped its SA database, again). The kernel
# times such a request out; the shim does what the kernel does. Preloaded
# ahead of umad2sim into the unit, from here in the container:
TIMEOUT_SHIM = os.environ.get("SMHA_UMAD_TIMEOUT_SHIM", "")
TIMEOUT_SHIM_IN_ROOT = "/usr/local/lib/smha-test/libsmha_umad_timeout_shim.so"
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET = os.path.join(TOP, "topologies", "two-switch-4hca.net")
# What the cached root carries: systemd, perl (on every real head; minbase lacks
# it, and unpacking it would dominate each install), and the test's own tool
# (libumad2sim).
INCLUDE = "systemd,systemd-sysv,dbus,procps,perl,libumad2sim0"
# smha's dependencies (Depends, Recommends and what dpkg-shlibdeps adds),
# downloaded (not installed) into the root's apt archive so that
# `apt install ./smha.deb` resolves them without the network.
PRESEED = ["opensm", "libibumad3", "adduser", "infiniband-diags", "libfmt9", "libspdlog1.10",
           "libyaml-cpp0.7", "libsystemd0"]
# Changes with INCLUDE/PRESEED: a cached root of another version is rebuilt.
ROOT_VERSION = "2 " + INCLUDE + " " + " ".join(PRESEED)
CENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8", "HOME": "/root"}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def wait_until(what, timeout, fn, interval=0.1):
    """Polls fn() until it returns something truthy; fails naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except Failure as e:
            last = e
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def run(cmd, timeout=600, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


# --- the cached root ---------------------------------------------------------------

def cached_root():
    """Returns the pristine cached root, building it (under a lock) when missing."""
    root = os.path.join(CACHE, "root")
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = os.path.join(root, ".smha-ready")
        if os.path.exists(ready) and open(ready).read() == ROOT_VERSION:
            tune_root(root)
            return root
        new = os.path.join(CACHE, "root.new")
        shutil.rmtree(new, ignore_errors=True)
        log(f"debootstrap bookworm from {MIRROR} into {new} (cold cache)")
        t0 = time.monotonic()
        r = run(["debootstrap", "--variant=minbase", f"--include={INCLUDE}", "bookworm", new, MIRROR],
                timeout=900)
        if r.returncode != 0:
            raise Failure(f"debootstrap failed ({r.returncode}): {r.stdout[-2000:]}{r.stderr[-2000:]}")
        # Pre-download smha's dependencies into the root's apt archive.
        r = run(["chroot", new, "sh", "-c",
                 "apt-get update -qq && apt-get install -y -qq --download-only " + " ".join(PRESEED)],
                env=CENV, timeout=600)
        if r.returncode != 0:
            raise Failure(f"pre-seeding {PRESEED} failed: {r.stdout[-2000:]}{r.stderr[-2000:]}")
        tune_root(new)
        with open(os.path.join(new, ".smha-ready"), "w") as f:
            f.write(ROOT_VERSION)
        shutil.rmtree(root, ignore_errors=True)
        os.rename(new, root)
        log(f"cached root ready in {time.monotonic() - t0:.0f}s")
        return root


def tune_root(root):
    """Test-machine settings of the cached root (not the product's): dpkg without
    fsync (containers are thrown away), as Debian's container images do."""
    cfg = os.path.join(root, "etc/dpkg/dpkg.cfg.d/smha-system-test")
    if not os.path.exists(cfg):
        with open(cfg, "w") as f:
            f.write("# smha system tier: throwaway containers\nforce-unsafe-io\n")


# --- ibsim on the host -----------------------------------------------------------

class Ibsim:
    """One simulated fabric. `name` keeps two of them apart (their own
    directories and IBSIM_SOCKNAME); `guid_base`, when given, moves every GUID
    of the topology (ibsim's switchguid/caguid lines), as a second rail's
    HCAs and switches have GUIDs of their own."""
    def __init__(self, scratch, name="ibsim", guid_base=None):
        self.dir = os.path.join(scratch, name)
        os.makedirs(self.dir)
        self.sock = f"smha-system-{name}-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
        net = NET
        if guid_base is not None:
            net = os.path.join(self.dir, "fabric.net")
            with open(net, "w") as f, open(NET) as base:
                f.write(f"switchguid={guid_base:#018x}\ncaguid={guid_base + 0x100000:#018x}\n" + base.read())
        self.out = open(os.path.join(self.dir, "ibsim.out"), "w+")
        self.proc = subprocess.Popen(["ibsim", "-s", net], cwd=self.dir, stdin=subprocess.PIPE,
                                     stdout=self.out, stderr=subprocess.STDOUT, text=True,
                                     env=dict(os.environ, IBSIM_SOCKNAME=self.sock), start_new_session=True)
        wait_until("ibsim's prompt", 30, lambda: self.proc.poll() is None and "sim> " in self.read_out())
        check(self.proc.poll() is None, f"ibsim exited: {self.read_out()[-500:]}")
        self.run_dir = os.path.join(scratch, name + "-run")
        os.makedirs(self.run_dir)

    def read_out(self):
        with open(os.path.join(self.dir, "ibsim.out")) as f:
            return f.read()

    def console(self, line):
        """Sends LINE to ibsim's console and waits for its next prompt."""
        prompts = self.read_out().count("sim> ")
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        wait_until(f"ibsim: {line}", 10, lambda: self.read_out().count("sim> ") > prompts)

    def client_env(self, node):
        return {"LD_PRELOAD": UMAD2SIM, "SIM_HOST": node, "IBSIM_SOCKNAME": self.sock}

    def attach(self, node, cmd):
        """The command line and environment that run CMD attached at NODE."""
        return cmd, dict(os.environ, **self.client_env(node))

    def run_at(self, node, *cmd, timeout=10):
        """Runs a query tool attached at NODE on the host (bounded; killed by PID)."""
        argv, env = self.attach(node, list(cmd))
        p = subprocess.Popen(argv, cwd=self.run_dir, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise Failure(f"{cmd} at {node} timed out after {timeout}s")
        return p.returncode, out, err

    def port_guid(self, node):
        rc, out, err = self.run_at(node, "ibstat", "-p")
        check(rc == 0 and out.strip(), f"ibstat -p at {node}: rc {rc} {err}")
        return out.split()[0]

    def sminfo(self, node):
        """(state name, lid) of the master seen from NODE, e.g. ('SMINFO_MASTER', 1)."""
        rc, out, err = self.run_at(node, "sminfo")
        if rc != 0:
            return None
        m = re.search(r"sminfo: sm lid (\d+) sm guid (0x[0-9a-f]+), activity count \d+ priority (\d+) state (\d+) (\w+)", out)
        return m and {"lid": int(m.group(1)), "guid": m.group(2), "priority": int(m.group(3)), "state": m.group(5)}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.out.close()


# --- a booted container ----------------------------------------------------------

class Container:
    def __init__(self, scratch, name, lower):
        self.name = name
        base = os.path.join(scratch, name)
        self.upper, self.work, self.root = (os.path.join(base, d) for d in ("upper", "work", "root"))
        for d in (self.upper, self.work, self.root):
            os.makedirs(d)
        r = run(["mount", "-t", "overlay", "overlay", "-o",
                 f"lowerdir={lower},upperdir={self.upper},workdir={self.work}", self.root])
        check(r.returncode == 0, f"overlay mount of {self.root}: {r.stderr}")
        self.mounted = True
        self.console = open(os.path.join(base, "console.log"), "w")
        self.nspawn = subprocess.Popen(
            ["systemd-nspawn", "-q", "-D", self.root, "--boot", "--console=pipe", "--register=no",
             "--keep-unit", f"--machine={name}"] + self.nspawn_extra(),
            stdin=subprocess.DEVNULL, stdout=self.console, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid1 = wait_until(f"{name}'s PID 1", 30, self._find_pid1)
        t0 = time.monotonic()
        state = wait_until(f"{name} booted", 60, lambda: self.booted())
        log(f"{name}: booted ({state}) in {time.monotonic() - t0:.1f}s, PID 1 = host pid {self.pid1}")

    def nspawn_extra(self):
        """More systemd-nspawn options (a subclass's: the Pacemaker tier's own network namespace)."""
        return []

    def _find_pid1(self):
        check(self.nspawn.poll() is None, f"systemd-nspawn exited {self.nspawn.returncode}")
        try:
            kids = open(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children").read().split()
        except FileNotFoundError:
            return None
        for k in kids:
            try:
                if open(f"/proc/{k}/comm").read().strip() == "systemd":
                    return int(k)
            except FileNotFoundError:
                pass
        return None

    def booted(self):
        r = self.sh("systemctl is-system-running", check_rc=False)
        state = r.stdout.strip()
        return state if state in ("running", "degraded") else None

    def sh(self, script, check_rc=True, timeout=120):
        r = run(["nsenter", "-t", str(self.pid1), "-m", "-u", "-i", "-p", "-n", "/bin/sh", "-c", script],
                env=CENV, timeout=timeout)
        if check_rc and r.returncode != 0:
            raise Failure(f"{self.name}: `{script}` exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return r

    def write(self, path, text, mode=0o644):
        """Writes a file inside the container (as the operator would with an editor)."""
        host = self.root + path
        with open(host, "w") as f:
            f.write(text)
        os.chmod(host, mode)

    def read(self, path):
        with open(self.root + path) as f:
            return f.read()

    def stop(self):
        if self.nspawn.poll() is None:
            # nspawn turns SIGTERM into an orderly power-off of the container.
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.nspawn.kill()
                self.nspawn.wait()
        if self.pid1:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid1, signal.SIGKILL)  # the pid namespace goes with it
        self.console.close()
        if self.mounted:
            for _ in range(50):
                if run(["umount", self.root]).returncode == 0:
                    self.mounted = False
                    break
                time.sleep(0.1)


# --- smha inside a container -----------------------------------------------------

def install_deb(c, deb):
    """apt install ./smha_*.deb exactly as the README says."""
    shutil.copy(deb, c.root + "/root/" + os.path.basename(deb))
    t0 = time.monotonic()
    r = c.sh(f"apt-get install -y --no-install-recommends /root/{os.path.basename(deb)}", check_rc=False,
             timeout=300)
    check(r.returncode == 0, f"apt install of {deb} failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    log(f"{c.name}: apt install {os.path.basename(deb)} in {time.monotonic() - t0:.1f}s")
    return r


def sim_dropin(c, ibsim, node, unit="smhad.service", cwd="/var/lib/smha"):
    """The one change to the shipped unit: umad2sim's environment with the
    timeout shim ahead of it (as the ibsim tier runs OpenSM), a writable cwd."""
    if not TIMEOUT_SHIM or not os.path.isfile(TIMEOUT_SHIM):
        raise Failure(f"SMHA_UMAD_TIMEOUT_SHIM is not the build's libsmha_umad_timeout_shim.so: {TIMEOUT_SHIM!r}")
    os.makedirs(os.path.dirname(c.root + TIMEOUT_SHIM_IN_ROOT), exist_ok=True)
    shutil.copy(TIMEOUT_SHIM, c.root + TIMEOUT_SHIM_IN_ROOT)
    os.makedirs(c.root + f"/etc/systemd/system/{unit}.d", exist_ok=True)
    c.write(f"/etc/systemd/system/{unit}.d/ibsim.conf",
            "[Service]\n"
            f"Environment=LD_PRELOAD={TIMEOUT_SHIM_IN_ROOT}:{UMAD2SIM} SIM_HOST={node} IBSIM_SOCKNAME={ibsim.sock}\n"
            f"WorkingDirectory={cwd}\n")
    c.sh(f"mkdir -p {cwd} && systemctl daemon-reload")


def smctl_status(c, user=None):
    cmd = "smctl status" if user is None else f"setpriv --reuid={user} --regid={user} --init-groups smctl status"
    return c.sh(cmd, check_rc=False)


def unit_prop(c, prop):
    return c.sh(f"systemctl show -P {prop} smhad.service").stdout.strip()


def opensm_pid(c, state_dir="/var/lib/smha"):
    m = re.search(r"^pid=(\d+)", c.read(state_dir + "/opensm.pid"), re.M)
    return int(m.group(1)) if m else None


@contextlib.contextmanager
def scratch_dir(name):
    d = tempfile.mkdtemp(prefix=f"smha-system-{name}-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(scenarios):
    """Runs argv[1] (a scenario name) with the .deb argv[2]."""
    if len(sys.argv) < 3 or sys.argv[1] not in scenarios:
        print(f"usage: {sys.argv[0]} {{{'|'.join(scenarios)}}} SMHA_DEB [SMHA_DEB_UPGRADE]", file=sys.stderr)
        return 2
    name = sys.argv[1]
    t0 = time.monotonic()
    root = cached_root()
    log(f"cached root: {root} ({time.monotonic() - t0:.1f}s)")
    started = []
    with scratch_dir(name) as scratch:
        try:
            scenarios[name](scratch, root, sys.argv[2:], started)
        except Failure as e:
            log(f"FAIL {name}: {e}")
            for obj in started:
                if isinstance(obj, Container):
                    r = obj.sh("journalctl -u 'smhad*' --no-pager | tail -60; tail -20 /var/log/opensm*.log",
                               check_rc=False)
                    log(f"--- {obj.name}: smhad journal, opensm.log\n{r.stdout}{r.stderr}")
            return 1
        finally:
            for obj in reversed(started):
                obj.stop()
    log(f"PASS {name} in {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    # Alone: prepares (or checks) the cached root, e.g. as a ctest fixture.
    t0 = time.monotonic()
    log(f"cached root: {cached_root()} ({time.monotonic() - t0:.1f}s)")

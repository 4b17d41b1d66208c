# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
"""The Pacemaker tier (ctest label "pacemaker", registered only with
-DSMHA_PACEMAKER_TIER=ON; doc/pacemaker.md, "The Pacemaker tier").

Two booted Debian 12 containers (systemd-nspawn, the system tier's cached root
plus a cached layer with corosync, pacemaker and resource-agents from Debian),
each in a private network namespace this test creates, joined by a veth pair.
ibsim runs in head01's namespace in remote mode (TCP/UDP on the veth address),
so both heads' OpenSM and smhad (under libumad2sim) sit on one fabric. The smha
.deb is installed with apt as the README says; the cluster runs the clone
ocf:smha:smhad (instance fab0) and a Dummy resource with a location rule on
smha-master-fab0; stonith-enabled=false.

Scenario `drills`: the clone starts, one head MASTER, the attribute and the
Dummy with it; kill -9 of the master's OpenSM -> new MASTER, attribute, Dummy
moved (each timed from the kill); `crm_standby` of the master's node -> one
planned handover; no failure recorded for smhad on either head. Prints the idle
CPU and memory of corosync + pacemaker beside smhad.

Everything started here (ibsim, containers, namespaces, mounts) is stopped or
removed by PID or name, also on failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "system"))
import systest  # noqa: E402
from systest import Failure, check, log, run, wait_until  # noqa: E402

LAYER_PACKAGES = ["corosync", "pacemaker", "pacemaker-cli-utils", "resource-agents"]
LAYER_VERSION = "1 " + " ".join(LAYER_PACKAGES)
SUBNET = "10.231.47"          # only inside the namespaces this test creates
IBSIM_PORT = 7070
HEADS = {"head01": {"hca": "Hca1", "addr": f"{SUBNET}.1"},
         "head02": {"hca": "Hca2", "addr": f"{SUBNET}.2"}}


def pcmk_layer(root):
    """A cached overlay layer over the system tier's root with the cluster stack
    installed (its services disabled: the test starts them once configured)."""
    base = os.path.join(systest.CACHE, "pcmk-layer")
    upper = os.path.join(base, "upper")
    ready = os.path.join(base, ".ready")
    if os.path.exists(ready) and open(ready).read() == LAYER_VERSION + " " + open(root + "/.smha-ready").read():
        return upper
    shutil.rmtree(base, ignore_errors=True)
    work, mnt = os.path.join(base, "work"), os.path.join(base, "mnt")
    for d in (upper, work, mnt):
        os.makedirs(d)
    t0 = time.monotonic()
    r = run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={root},upperdir={upper},workdir={work}", mnt])
    check(r.returncode == 0, f"overlay mount for the cluster layer: {r.stderr}")
    try:
        r = run(["chroot", mnt, "sh", "-c",
                 "apt-get update -qq && apt-get install -y -qq --no-install-recommends " + " ".join(LAYER_PACKAGES)
                 + " && systemctl disable corosync pacemaker"],
                env=dict(systest.CENV, RUNLEVEL="1"), timeout=900)
        check(r.returncode == 0, f"installing {LAYER_PACKAGES}: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    finally:
        run(["umount", mnt])
    shutil.rmtree(work, ignore_errors=True)
    with open(ready, "w") as f:
        f.write(LAYER_VERSION + " " + open(root + "/.smha-ready").read())
    log(f"cluster layer ready in {time.monotonic() - t0:.0f}s")
    return upper


class Netns:
    """A network namespace of this test's own (ip netns), removed by name."""
    def __init__(self, name):
        self.name = name
        r = run(["ip", "netns", "add", name])
        check(r.returncode == 0, f"ip netns add {name}: {r.stderr}")
        run(["ip", "-n", name, "link", "set", "lo", "up"])
        self.path = f"/run/netns/{name}"

    def stop(self):
        run(["ip", "netns", "delete", self.name])


class RemoteIbsim(systest.Ibsim):
    """ibsim in a namespace, in remote mode: umad2sim clients reach it at
    IBSIM_SERVER_NAME:IBSIM_SERVER_PORT over the veth link."""
    def __init__(self, scratch, netns, addr):
        self.dir = os.path.join(scratch, "ibsim")
        os.makedirs(self.dir)
        self.addr = addr
        self.sock = f"smha-pcmk-{os.getpid()}"
        self.out = open(os.path.join(self.dir, "ibsim.out"), "w+")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, "ibsim", "-r", "-l", str(IBSIM_PORT), "-s", systest.NET],
            cwd=self.dir, stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.STDOUT, text=True,
            env=dict(os.environ, IBSIM_SOCKNAME=self.sock), start_new_session=True)
        wait_until("ibsim's prompt", 30, lambda: self.proc.poll() is None and "sim> " in self.read_out())
        check(self.proc.poll() is None, f"ibsim exited: {self.read_out()[-500:]}")
        self.netns = netns
        self.run_dir = os.path.join(scratch, "ibsim-run")
        os.makedirs(self.run_dir)

    def client_env(self, node):
        return {"LD_PRELOAD": systest.UMAD2SIM, "SIM_HOST": node,
                "IBSIM_SERVER_NAME": self.addr, "IBSIM_SERVER_PORT": str(IBSIM_PORT)}

    def attach(self, node, cmd):
        """CMD attached at NODE, run in ibsim's namespace (umad2sim only in CMD, not in ip)."""
        env = [f"{k}={v}" for k, v in self.client_env(node).items()]
        return ["ip", "netns", "exec", self.netns, "env"] + env + cmd, dict(os.environ)


class NetContainer(systest.Container):
    """A booted container in a network namespace of its own, over the cluster layer."""
    def __init__(self, scratch, name, lowers, netns):
        self.netns_path = netns.path
        super().__init__(scratch, name, lowers)

    def nspawn_extra(self):
        return [f"--network-namespace-path={self.netns_path}"]


def pcmk_deb_install(c, deb, ibsim, head):
    systest.install_deb(c, deb)
    hca = HEADS[head]["hca"]
    shim = systest.TIMEOUT_SHIM_IN_ROOT
    os.makedirs(os.path.dirname(c.root + shim), exist_ok=True)
    shutil.copy(systest.TIMEOUT_SHIM, c.root + shim)
    unit = "smhad@fab0.service"
    os.makedirs(c.root + f"/etc/systemd/system/{unit}.d", exist_ok=True)
    # The test bed's only changes to the shipped unit: umad2sim in remote mode
    # (its UDP to ibsim on the veth address, which the unit's IP firewall must allow).
    c.write(f"/etc/systemd/system/{unit}.d/ibsim.conf",
            "[Service]\n"
            f"Environment=LD_PRELOAD={shim}:{systest.UMAD2SIM} SIM_HOST={hca} "
            f"IBSIM_SERVER_NAME={ibsim.addr} IBSIM_SERVER_PORT={IBSIM_PORT}\n"
            f"IPAddressAllow={SUBNET}.0/24\n"
            "WorkingDirectory=/var/lib/smha\n")
    c.sh("mkdir -p /var/lib/smha && systemctl daemon-reload")


def smha_yaml(head, guids):
    other = [h for h in HEADS if h != head][0]
    hooks = "/usr/share/smha/hooks/pacemaker-attribute"
    return (f"node:\n  name: {head}\n  port_guid: {guids[head]}\n"
            f"peers:\n  - name: {other}\n    port_guid: {guids[other]}\n"
            "failover:\n  poll_interval_ms: 100\n  misses_before_takeover: 3\n"
            f"hooks:\n  master: {hooks}\n  standby: {hooks}\n  fault: {hooks}\n")


def corosync_conf():
    nodes = "".join(f"  node {{\n    ring0_addr: {v['addr']}\n    name: {h}\n    nodeid: {i + 1}\n  }}\n"
                    for i, (h, v) in enumerate(HEADS.items()))
    return ("totem {\n  version: 2\n  cluster_name: smha\n  transport: knet\n"
            "  crypto_cipher: none\n  crypto_hash: none\n}\n"
            f"nodelist {{\n{nodes}}}\n"
            "quorum {\n  provider: corosync_votequorum\n  two_node: 1\n}\n"
            "logging {\n  to_syslog: yes\n}\n")


CIB_RESOURCES = """
<resources>
  <clone id="smhad-fab0-clone">
    <meta_attributes id="smhad-fab0-clone-meta"><nvpair id="smhad-fab0-clone-interleave" name="interleave" value="true"/></meta_attributes>
    <primitive id="smhad-fab0" class="ocf" provider="smha" type="smhad">
      <instance_attributes id="smhad-fab0-params"><nvpair id="smhad-fab0-instance" name="instance" value="fab0"/></instance_attributes>
      <operations>
        <op id="smhad-fab0-monitor" name="monitor" interval="5s" timeout="30s"/>
        <op id="smhad-fab0-start" name="start" interval="0" timeout="90s"/>
        <op id="smhad-fab0-stop" name="stop" interval="0" timeout="90s"/>
      </operations>
    </primitive>
  </clone>
  <primitive id="with-master" class="ocf" provider="pacemaker" type="Dummy">
    <operations><op id="with-master-monitor" name="monitor" interval="10s"/></operations>
  </primitive>
</resources>"""
CIB_CONSTRAINTS = """
<constraints>
  <rsc_location id="with-master-on-master" rsc="with-master">
    <rule id="with-master-rule" score="-INFINITY" boolean-op="or">
      <expression id="with-master-undef" attribute="smha-master-fab0" operation="not_defined"/>
      <expression id="with-master-ne" attribute="smha-master-fab0" operation="ne" value="1"/>
    </rule>
  </rsc_location>
  <rsc_order id="smhad-before-with-master" first="smhad-fab0-clone" then="with-master" kind="Mandatory"/>
</constraints>"""


def attribute(c, node):
    r = c.sh(f"attrd_updater -Q -n smha-master-fab0 -N {node}", check_rc=False)
    m = re.search(r'value="([^"]*)"', r.stdout)
    return m and m.group(1)


def located(c, rsc):
    r = c.sh(f"crm_resource --locate -r {rsc}", check_rc=False)
    m = re.search(r"is running on: (\S+)", r.stdout)
    return m and m.group(1)


def sm_state(c):
    r = c.sh("smctl status --json --socket /run/smha/fab0.sock", check_rc=False)
    if r.returncode != 0:
        return None
    return (json.loads(r.stdout)["data"].get("local") or {}).get("state")


def transition_ms(c, since_wall):
    """ms from since_wall to c's SM_TRANSITION to MASTER in the journal (one clock: the host's)."""
    r = c.sh(f"journalctl -u smhad@fab0 -o short-unix --no-pager --since @{int(since_wall) - 1}", check_rc=False)
    for line in r.stdout.splitlines():
        if "SM_TRANSITION" in line and "to=MASTER" in line:
            t = float(line.split()[0])
            if t >= since_wall - 0.001:
                return 1000 * (t - since_wall)
    raise Failure(f"{c.name}: no SM_TRANSITION to=MASTER in the journal since the kill:\n{r.stdout[-2000:]}")


def drills(scratch, root, debs, started):
    deb = debs[0]
    layer = pcmk_layer(root)
    lowers = f"{layer}:{root}"
    na, nb = Netns(f"smha-pcmk-a-{os.getpid()}"), Netns(f"smha-pcmk-b-{os.getpid()}")
    started += [na, nb]
    va, vb = f"smpa{os.getpid() % 10000}", f"smpb{os.getpid() % 10000}"
    r = run(["ip", "link", "add", va, "netns", na.name, "type", "veth", "peer", "name", vb, "netns", nb.name])
    check(r.returncode == 0, f"veth {va}/{vb}: {r.stderr}")
    for ns, dev, addr in ((na, va, HEADS["head01"]["addr"]), (nb, vb, HEADS["head02"]["addr"])):
        run(["ip", "-n", ns.name, "addr", "add", f"{addr}/24", "dev", dev])
        run(["ip", "-n", ns.name, "link", "set", dev, "up"])
    ibsim = RemoteIbsim(scratch, na.name, HEADS["head01"]["addr"])
    started.append(ibsim)
    guids = {h: ibsim.port_guid(v["hca"]) for h, v in HEADS.items()}
    cs = {}
    for head, ns in (("head01", na), ("head02", nb)):
        c = NetContainer(scratch, head, lowers, ns)
        started.append(c)
        cs[head] = c
    # umad2sim names a client after its PID: keep the two heads' PIDs apart.
    cs["head02"].sh("i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done")
    for head, c in cs.items():
        pcmk_deb_install(c, deb, ibsim, head)
        c.write("/etc/smha/fab0.yaml", smha_yaml(head, guids))
        c.write("/etc/corosync/corosync.conf", corosync_conf())
    t0 = time.monotonic()
    for c in cs.values():
        c.sh("systemctl start corosync pacemaker")
    a = cs["head01"]
    wait_until("both nodes online", 120,
               lambda: re.search(r"Online: \[ head01 head02 \]", a.sh("crm_mon -1", check_rc=False).stdout))
    log(f"cluster formed {time.monotonic() - t0:.1f}s after corosync/pacemaker start")
    a.sh("crm_attribute -t crm_config -n stonith-enabled -v false")
    a.sh(f"cibadmin --replace -o resources --xml-text '{CIB_RESOURCES}'")
    a.sh(f"cibadmin --replace -o constraints --xml-text '{CIB_CONSTRAINTS}'")
    wait_until("head01 MASTER, head02 STANDBY", 120,
               lambda: sm_state(cs["head01"]) == "MASTER" and sm_state(cs["head02"]) == "STANDBY")
    wait_until("smha-master-fab0 1 on head01, 0 on head02", 30,
               lambda: attribute(a, "head01") == "1" and attribute(a, "head02") == "0")
    wait_until("with-master on head01", 60, lambda: located(a, "with-master") == "head01")
    log(f"clone started, head01 MASTER, attribute and dependent resource with it, "
        f"{time.monotonic() - t0:.1f}s after the cluster start")

    # Idle cost of the cluster stack beside smhad (each head, 10 s of CPU).
    def cpu_ticks(c, names):
        r = c.sh("for p in $(pgrep -d' ' -x '" + "|".join(names) + "'); do cat /proc/$p/stat 2>/dev/null; done; true")
        return sum(int(line.rsplit(")", 1)[1].split()[11]) + int(line.rsplit(")", 1)[1].split()[12])
                   for line in r.stdout.splitlines() if line)

    def rss_kib(c, names):
        r = c.sh("for p in $(pgrep -d' ' -x '" + "|".join(names) + "'); do grep VmRSS /proc/$p/status 2>/dev/null; done; true")
        return sum(int(x) for x in re.findall(r"(\d+) kB", r.stdout))
    stack = ["corosync", "pacemakerd", "pacemaker-based", "pacemaker-fenced", "pacemaker-execd",
             "pacemaker-attrd", "pacemaker-schedulerd", "pacemaker-controld"]
    before = {h: (cpu_ticks(c, stack), cpu_ticks(c, ["smhad", "opensm"])) for h, c in cs.items()}
    time.sleep(10)
    hz = os.sysconf("SC_CLK_TCK")
    for h, c in cs.items():
        st = (cpu_ticks(c, stack) - before[h][0]) / hz / 10 * 100
        sm = (cpu_ticks(c, ["smhad", "opensm"]) - before[h][1]) / hz / 10 * 100
        log(f"{h} idle: corosync+pacemaker {st:.1f}% CPU, {rss_kib(c, stack) // 1024} MiB RSS; "
            f"smhad+opensm {sm:.1f}% CPU, {rss_kib(c, ['smhad', 'opensm']) // 1024} MiB RSS")

    # kill -9 of the master's OpenSM.
    osm = systest.opensm_pid(a, "/var/lib/smha/fab0")
    check(osm, "no OpenSM pid on head01")
    b = cs["head02"]
    t_kill, wall_kill = time.monotonic(), time.time()
    a.sh(f"kill -KILL {osm}")
    wait_until("head02 MASTER", 10, lambda: sm_state(b) == "MASTER", interval=0.005)
    t_master = time.monotonic()
    took = transition_ms(b, wall_kill)
    wait_until("smha-master-fab0=1 on head02", 30, lambda: attribute(b, "head02") == "1", interval=0.01)
    t_attr = time.monotonic()
    wait_until("with-master on head02", 60, lambda: located(b, "with-master") == "head02", interval=0.02)
    t_rsc = time.monotonic()
    log(f"kill -9: new MASTER {took:.0f} ms (smhad's SM_TRANSITION; seen by polling {1000 * (t_master - t_kill):.0f} ms), attribute {1000 * (t_attr - t_kill):.0f} ms, "
        f"dependent resource active {1000 * (t_rsc - t_kill):.0f} ms after the kill")
    wait_until("head01 STANDBY again", 30, lambda: sm_state(a) == "STANDBY")

    # A clean standby of the master's node: one planned handover.
    t_sb, wall_sb = time.monotonic(), time.time()
    b.sh("crm_attribute -N head02 -n standby -v on")
    wait_until("head01 MASTER after head02's standby", 60, lambda: sm_state(a) == "MASTER")
    wait_until("with-master on head01", 60, lambda: located(a, "with-master") == "head01")
    log(f"standby of head02: head01 MASTER and with-master moved in {time.monotonic() - t_sb:.1f}s")
    since = f"--since @{int(wall_sb) - 1}"
    jb = b.sh(f"journalctl -u smhad@fab0 -o cat --no-pager {since}", check_rc=False).stdout
    ja = a.sh(f"journalctl -u smhad@fab0 -o cat --no-pager {since}", check_rc=False).stdout
    handovers = jb.count("kind=handover_done")
    check(handovers == 1, f"expected one handover_done on head02 for its standby, saw {handovers}:\n{jb[-3000:]}")
    check("kind=takeover_started" not in ja, f"head01 took over instead of a planned handover:\n{ja[-3000:]}")
    log("one planned handover (head02's journal), no takeover on head01")
    b.sh("crm_attribute -N head02 -n standby -v off")
    wait_until("head02 STANDBY again", 90, lambda: sm_state(b) == "STANDBY")

    # The cluster never stopped a healthy smhad: no failure recorded.
    fails = a.sh("crm_mon -1 --include=failcounts,failures", check_rc=False).stdout
    check("smhad-fab0" not in fails.split("Failed Resource Actions")[-1] if "Failed Resource Actions" in fails
          else True, f"failed actions recorded:\n{fails}")
    log("no failed action for smhad-fab0")


if __name__ == "__main__":
    sys.exit(systest.main({"drills": drills}))

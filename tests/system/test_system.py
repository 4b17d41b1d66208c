#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
"""The system tier's scenarios (doc/packaging.md, "The system tier"): the .deb
installed with apt into booted Debian 12 containers, configured only as the
README's quick start says. Usage: test_system.py SCENARIO SMHA_DEB"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from systest import (Container, Failure, Ibsim, check, install_deb, log, main,  # noqa: E402
                     opensm_pid, sim_dropin, unit_prop, wait_until)

# The build's workload client (bench_workload_client), run on the host at a
# compute node: the system tier's SA continuity scenario needs a workload.
WORKLOAD_CLIENT = os.environ.get("SMHA_WORKLOAD_CLIENT", "")

HOOK = """#!/bin/sh
# smha notify hook (doc/hooks.md): one line per event, with what the sandbox
# doc/hooks.md describes lets it do (read-only /etc, no new privileges, no /root).
if touch /etc/smha/.hook-probe 2>/dev/null; then etc=writable; else etc=read-only; fi
nnp=$(awk '/^NoNewPrivs:/ {print $2}' /proc/self/status)
if [ -e /root/.profile ]; then home=visible; else home=hidden; fi
echo "$(date +%s) $* etc=$etc nnp=$nnp root_home=$home" >> /var/log/smha/hook-events.log
"""


def smha_yaml(name, guid, peer_name, peer_guid, port=None, extra=""):
    """/etc/smha/smha.yaml as the README's table says (the peer by name and
    port_guid only: smhad finds its route and LID by discovery), plus every
    documented option that touches files or the network."""
    metrics = f"metrics:\n  listen: 127.0.0.1:{port}\n  textfile_dir: /var/lib/prometheus/node-exporter\n" \
              f"  textfile_interval_s: 1\n" if port else ""
    return f"""node:
  name: {name}
  port_guid: {guid}
peers:
  - name: {peer_name}
    port_guid: {peer_guid}
sm_priority: 10
sm_key_file: /etc/smha/sm_key
sa_key_file: /etc/smha/sa_key
opensm:
  log_file: /var/log/opensm.log
  dump_files_dir: /var/log/
  cache_dir: /var/cache/opensm
hooks:
  master: /etc/smha/hooks/notify
  standby: /etc/smha/hooks/notify
{metrics}{extra}"""


def status_json(c):
    r = c.sh("smctl status --json", check_rc=False)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout).get("data")


def role(c):
    s = status_json(c)
    return s and s.get("role")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configure_head(c, ibsim, node, yaml, key):
    """The quick start on one head: the key file, the config, the hook, the
    check, then systemctl enable --now (plus the test's umad2sim drop-in)."""
    c.sh(f"umask 077; printf '%s\\n' {key} > /etc/smha/sm_key")
    # The SA key: another key, the same on every head (README quick start).
    c.sh("umask 077; printf '%s\\n' 0x00000000d00d5a01 > /etc/smha/sa_key")
    c.write("/etc/smha/smha.yaml", yaml)
    c.sh("mkdir -p /etc/smha/hooks")
    c.write("/etc/smha/hooks/notify", HOOK, 0o755)
    sim_dropin(c, ibsim, node)


def enable_now(c):
    t0 = time.monotonic()
    r = c.sh("systemctl enable --now smhad", check_rc=False, timeout=120)
    check(r.returncode == 0, f"{c.name}: systemctl enable --now smhad: {r.stdout}{r.stderr}"
          f"\nStatusText={unit_prop(c, 'StatusText')}")
    log(f"{c.name}: enable --now returned after {time.monotonic() - t0:.1f}s: {unit_prop(c, 'StatusText')!r}")


def first_install(scratch, root, debs, started):
    """One head, every documented option that touches files or the network."""
    ibsim = Ibsim(scratch)
    started.append(ibsim)
    guids = {n: ibsim.port_guid(n) for n in ("Hca1", "Hca2")}
    c = Container(scratch, f"smha-h1-{os.getpid()}", root)
    started.append(c)
    install_deb(c, debs[0])
    # Installing smha (which pulls opensm) starts no OpenSM.
    r = c.sh("systemctl is-active opensm.service; systemctl is-enabled opensm.service", check_rc=False)
    j = c.sh("journalctl -u opensm.service -o cat --no-pager", check_rc=False).stdout
    check(r.stdout.split() == ["inactive", "disabled"] and "Start" not in j,
          f"opensm.service after installing smha: {r.stdout.split()}, its journal: {j.strip()}")
    check(c.sh("pgrep -x opensm", check_rc=False).returncode == 1, "an opensm process runs after install")
    check(c.sh("systemctl is-enabled smhad", check_rc=False).stdout.strip() == "disabled",
          "smhad enabled by the package")
    port = free_port()
    # Error counters read from the start (doc/configuration.md, health).
    configure_head(c, ibsim, "Hca1", smha_yaml("head01", guids["Hca1"], "head02", guids["Hca2"], port,
                                               extra="health:\n  counter_start_after_s: 0\n"),
                   "0x00000000c0ffee01")
    # node_exporter's textfile directory (its package creates it).
    c.sh("mkdir -p /var/lib/prometheus/node-exporter")
    r = c.sh("smhad --check-config -c /etc/smha/smha.yaml", check_rc=False)
    check(r.returncode == 0 and "sm_key: not set" not in r.stdout + r.stderr
          and "sa_key:" not in r.stdout + r.stderr,
          f"--check-config: {r.returncode} {r.stdout}{r.stderr}")
    enable_now(c)
    check(c.sh("systemctl is-active smhad", check_rc=False).stdout.strip() == "active", "smhad not active")
    wait_until("smctl status: role master", 30, lambda: role(c) == "master")
    wait_until("STATUS= line MASTER", 10, lambda: unit_prop(c, "StatusText").startswith("MASTER"))
    s = status_json(c)
    check(s["opensm"].get("supervisor") == "running", f"OpenSM not running: {s['opensm']}")
    check(not s.get("alarms"), f"alarms: {s.get('alarms')}")
    # A third node (Hca3, on the host) sees head01's port as MASTER.
    m = wait_until("Hca3 sees a MASTER", 20, lambda: ibsim.sminfo("Hca3"))
    check(int(m["guid"], 16) == int(guids["Hca1"], 16) and m["state"] == "SMINFO_MASTER", f"Hca3 sminfo: {m}")
    # The installed `smctl sminfo` (it runs /usr/libexec/smha/smctl-sminfo) on the head
    # asks its own port's SM. The environment stands for the head's HCA (umad2sim),
    # as the drop-in does for the unit; umad2sim writes ./sys-<pid>, so a scratch cwd.
    env = " ".join(f"{k}={v}" for k, v in ibsim.client_env("Hca1").items())
    r = c.sh(f"cd \"$(mktemp -d)\" && env {env} smctl sminfo --json --timeout 2000", check_rc=False)
    check(r.returncode == 0, f"smctl sminfo in the container: exit {r.returncode}: {r.stdout}{r.stderr}")
    info = json.loads(r.stdout)
    check(int(info["guid"], 16) == int(guids["Hca1"], 16) and info["state_name"] == "MASTER",
          f"smctl sminfo on head01: {info}")
    # The MASTER's head reads the ports' PMA error counters under the shipped
    # unit: a SymbolErrorCounter set at a switch port is listed and alarmed.
    def errors():
        r = c.sh("smctl health --json", check_rc=False)
        return json.loads(r.stdout)["data"]["health"]["errors"] if r.returncode == 0 else {}
    wait_until("error counters: every port read", 30,
               lambda: errors().get("state") == "reading" and errors().get("read") == 12)
    ibsim.console('PerformanceSet "Switch2"[2] PortCounters.SymbolErrorCounter=25')
    e = wait_until("error counters: Switch2 port 2 over its threshold", 30,
                   lambda: (lambda e: e if e.get("over_threshold") == 1 else None)(errors()))
    worst = e["listed"][0]
    check(worst["port"]["port"] == 2 and worst["rise"]["symbol_errors"] == 25 and worst["over_threshold"],
          f"error counters: {e}")
    out = c.sh("smctl health").stdout
    check("SymbolErrorCounter +25 (25)" in out, f"smctl health: {out}")
    wait_until("alarm link_errors", 10,
               lambda: any(a.get("kind") == "link_errors" for a in status_json(c).get("alarms", [])))
    # Files and network: cache dir (guid2lid), log file, dumps, textfile, listen, hook.
    wait_until("guid2lid in /var/cache/opensm", 20,
               lambda: os.path.exists(c.root + "/var/cache/opensm/guid2lid"))
    check("SUBNET UP" in c.read("/var/log/opensm.log"), "no SUBNET UP in /var/log/opensm.log")
    wait_until("opensm-sa.dump in /var/log", 30, lambda: os.path.exists(c.root + "/var/log/opensm-sa.dump"))
    prom = wait_until("smha.prom", 10, lambda: os.path.exists(c.root + "/var/lib/prometheus/node-exporter/smha.prom")
                      and c.read("/var/lib/prometheus/node-exporter/smha.prom"))
    check("smha_role" in prom, "smha.prom has no smha_role")
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    check('smha_role{node="head01",role="master"} 1' in body, f"GET /metrics: {body[:400]}")
    hooks = wait_until("the master hook ran", 10, lambda: c.read("/var/log/smha/hook-events.log")
                       if os.path.exists(c.root + "/var/log/smha/hook-events.log") else None)
    check(re.search(r"\bMASTER\b", hooks), f"hook-events.log: {hooks}")
    # The sandbox doc/hooks.md describes is the one a hook gets under the shipped unit.
    check(re.search(r"\bMASTER\b.* etc=read-only nnp=1 root_home=hidden", hooks),
          f"the hook's sandbox differs from doc/hooks.md: {hooks}")
    # No warning about an unwritable path in the journal.
    j = c.sh("journalctl -u smhad -o cat --no-pager").stdout
    # The descriptor limit the unit sets, and the control socket's caps well below it
    # (doc/control-protocol.md, "Limits").
    limits = c.sh(f"cat /proc/{unit_prop(c, 'MainPID')}/limits").stdout
    check(re.search(r"^Max open files\s+4096\s+4096", limits, re.M), f"smhad's limits: {limits}")
    m = re.search(r"CTL_LISTEN .*max_clients=(\d+) per_uid=(\d+) root_reserve=(\d+)", j)
    check(m and int(m[1]) + 64 <= 4096 and int(m[2]) < int(m[1]), f"control socket caps: {m and m[0]}")
    for bad in ("Read-only file system", "cannot write", "Permission denied", "ERR 6101"):
        check(bad not in j, f"journal mentions {bad!r}:\n{j[-3000:]}")


def failed_opensm(scratch, root, debs, started):
    """OpenSM cannot start (its cache dir cannot be created): the unit must not
    look healthy, and the reason must be OpenSM's own words."""
    ibsim = Ibsim(scratch)
    started.append(ibsim)
    guids = {n: ibsim.port_guid(n) for n in ("Hca1", "Hca2")}
    c = Container(scratch, f"smha-f1-{os.getpid()}", root)
    started.append(c)
    install_deb(c, debs[0])
    # A cache directory below a path the unit keeps read-only (ProtectSystem=strict).
    yaml = smha_yaml("head01", guids["Hca1"], "head02", guids["Hca2"]).replace(
        "cache_dir: /var/cache/opensm", "cache_dir: /usr/local/opensm-cache")
    configure_head(c, ibsim, "Hca1", yaml, "0x00000000c0ffee01")
    c.sh("systemctl enable smhad")
    r = c.sh("systemctl start smhad", check_rc=False, timeout=120)
    st = unit_prop(c, "StatusText")
    log(f"systemctl start: exit {r.returncode}; StatusText={st!r}")
    check(r.returncode != 0, "systemctl start smhad succeeded beside a failed OpenSM")
    wait_until("unit failed", 10, lambda: c.sh("systemctl is-active smhad", check_rc=False).stdout.strip() == "failed")
    check(unit_prop(c, "ExecMainStatus") == "78", f"exit status {unit_prop(c, 'ExecMainStatus')} (want 78)")
    check(unit_prop(c, "NRestarts") == "0", "the unit restarted smhad after an OpenSM start-up failure")
    # OpenSM's own words (from its log file), not a guess from its stdout.
    check("ERR 6101" in st and "umad" not in st, f"STATUS= does not give OpenSM's reason: {st!r}")
    j = c.sh("journalctl -u smhad -o cat --no-pager").stdout
    check("opensm_failed" in j and "ERR 6101" in j, f"journal: no opensm_failed alarm with OpenSM's reason:\n{j[-3000:]}")


def failover(scratch, root, debs, started):
    """Two containers = Head01 and Head02: kill -9 of the master's OpenSM -> the
    other head is MASTER, seen from a third node; sticky afterwards."""
    ibsim = Ibsim(scratch)
    started.append(ibsim)
    guids = {n: ibsim.port_guid(n) for n in ("Hca1", "Hca2")}
    h1 = Container(scratch, f"smha-a1-{os.getpid()}", root)
    started.append(h1)
    h2 = Container(scratch, f"smha-a2-{os.getpid()}", root)
    started.append(h2)
    # Both containers share the host's network namespace, and umad2sim names
    # its abstract ctl socket after the client's PID: two containers booted
    # alike hand out the same PIDs, and the second OpenSM (or smhad) fails
    # with "sim_init: can't bind ctl socket". Head02's PIDs start far above
    # head01's (nspawn keeps /proc/sys read-only, so ns_last_pid cannot be
    # set: spend the PIDs). Test bed only: on hardware each head has its umad.
    h2.sh("i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done")
    for c in (h1, h2):
        install_deb(c, debs[0])
    key = "0x00000000c0ffee02"
    configure_head(h1, ibsim, "Hca1", smha_yaml("head01", guids["Hca1"], "head02", guids["Hca2"]), key)
    enable_now(h1)
    wait_until("head01 master", 30, lambda: role(h1) == "master")
    # No LIDs in either config (no placeholder, no rewrite): each head finds
    # the other by its port GUID. A restart of smhad adopts the running OpenSM.
    pid1 = opensm_pid(h1)
    h1.sh("systemctl restart smhad")
    check(opensm_pid(h1) == pid1, "OpenSM PID changed by systemctl restart")
    configure_head(h2, ibsim, "Hca2", smha_yaml("head02", guids["Hca2"], "head01", guids["Hca1"]), key)
    enable_now(h2)
    wait_until("head02 standby", 30, lambda: role(h2) == "standby")
    wait_until("head01 master", 30, lambda: role(h1) == "master")
    t0 = time.monotonic()
    h1.sh(f"kill -9 {pid1}")
    wait_until("head02 master", 20, lambda: role(h2) == "master", interval=0.05)
    took = time.monotonic() - t0
    m = wait_until("Hca3 sees head02 MASTER", 20,
                   lambda: (lambda m: m if m and int(m["guid"], 16) == int(guids["Hca2"], 16) and m["state"] == "SMINFO_MASTER"
                            else None)(ibsim.sminfo("Hca3")))
    log(f"kill -9 of head01's OpenSM: head02 MASTER after {took:.2f}s; Hca3: {m}")
    # head01's smhad restarts its OpenSM, which comes back as STANDBY (sticky).
    wait_until("head01 back as standby", 60, lambda: role(h1) == "standby")
    for _ in range(10):
        check(role(h2) == "master" and role(h1) == "standby", "mastership moved back (not sticky)")
        time.sleep(0.2)
    # journald: the transition with MESSAGE_ID and SYSLOG_IDENTIFIER.
    j = [json.loads(line) for line in h2.sh("journalctl -u smhad -o json --no-pager").stdout.splitlines()]
    tr = [e for e in j if e.get("SMHA_EVENT") == "SM_TRANSITION" and "MASTER" in e.get("MESSAGE", "")]
    check(tr and tr[-1].get("MESSAGE_ID") and tr[-1].get("SYSLOG_IDENTIFIER") == "smhad",
          f"journal SM_TRANSITION entries: {tr[-1:] or j[-3:]}")


def continuity_yaml(name, guid, peer_name, peer_guid, listen_port, peer_port):
    """smha.yaml with the peer channel as doc/continuity.md says: the peer's
    address, the continuity section, the certificates under /etc/smha/tls."""
    y = smha_yaml(name, guid, peer_name, peer_guid)
    y = y.replace(f"    port_guid: {peer_guid}\n", f"    port_guid: {peer_guid}\n    address: \"127.0.0.1:{peer_port}\"\n")
    return y + f"""continuity:
  listen: "127.0.0.1:{listen_port}"
  certificate: /etc/smha/tls/{name}.pem
  private_key: /etc/smha/tls/{name}.key
  ca: /etc/smha/tls/ca.pem
"""


def continuity(scratch, root, debs, started):
    """Two containers with the peer channel configured (certificates made with
    the packaged make-peer-certs on an admin machine, here the host): a
    workload at Hca3 and Hca4 joins groups through head01's SA; head02 holds
    the copy; kill -9 of head01's OpenSM; head02's SA has every membership at
    the same MLID, and every ServiceRecord and subscription."""
    if not WORKLOAD_CLIENT:
        raise Failure("SMHA_WORKLOAD_CLIENT is not set (the build's bench_workload_client)")
    ibsim = Ibsim(scratch)
    started.append(ibsim)
    guids = {n: ibsim.port_guid(n) for n in ("Hca1", "Hca2")}
    h1 = Container(scratch, f"smha-c1-{os.getpid()}", root)
    started.append(h1)
    h2 = Container(scratch, f"smha-c2-{os.getpid()}", root)
    started.append(h2)
    h2.sh("i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done")  # distinct PIDs (see failover)
    for c in (h1, h2):
        install_deb(c, debs[0])
    # The packaged script, run where the CA key stays (the host).
    certs = os.path.join(scratch, "certs")
    script = os.path.join(scratch, "make-peer-certs")
    shutil.copy(h1.root + "/usr/share/smha/make-peer-certs", script)
    r = subprocess.run([script, certs, "head01", "head02"], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"make-peer-certs: {r.stdout}{r.stderr}")
    ports = {"head01": free_port(), "head02": free_port()}
    key = "0x00000000c0ffee05"
    for c, name, node, peer, peer_node in ((h1, "head01", "Hca1", "head02", "Hca2"),
                                           (h2, "head02", "Hca2", "head01", "Hca1")):
        c.sh("mkdir -p /etc/smha/tls")
        with open(os.path.join(certs, "ca.pem")) as f:
            c.write("/etc/smha/tls/ca.pem", f.read())
        with open(os.path.join(certs, name + ".pem")) as f:
            c.write(f"/etc/smha/tls/{name}.pem", f.read())
        with open(os.path.join(certs, name + ".key")) as f:
            c.write(f"/etc/smha/tls/{name}.key", f.read(), 0o600)
        configure_head(c, ibsim, node, continuity_yaml(name, guids[node], peer, guids[peer_node], ports[name],
                                                       ports[peer]), key)
        # doc/continuity.md: the unit's IP firewall allows the peer's address
        # (here loopback, which it allows anyway; not enforced on legacy cgroups).
        c.sh("mkdir -p /etc/systemd/system/smhad.service.d")
        c.write("/etc/systemd/system/smhad.service.d/continuity.conf", "[Service]\nIPAddressAllow=127.0.0.1\n")
        c.sh("systemctl daemon-reload")
        r = c.sh("smhad --check-config -c /etc/smha/smha.yaml", check_rc=False)
        check(r.returncode == 0, f"{name}: --check-config: {r.stdout}{r.stderr}")
    enable_now(h1)
    wait_until("head01 master", 30, lambda: role(h1) == "master")
    enable_now(h2)
    wait_until("head02 standby", 30, lambda: role(h2) == "standby")
    # The test bed as systest.sim_dropin says: OpenSM with the timeout shim
    # (without it, the master's sweeper could wait forever on head02's start).
    for c in (h1, h2):
        maps = c.sh(f"cat /proc/{opensm_pid(c)}/maps", check_rc=False).stdout
        check("libsmha_umad_timeout_shim" in maps, f"{c.name}: OpenSM runs without the umad timeout shim")
    lid1 = status_json(h1)["local"]["lid"]
    lid2 = status_json(h2)["local"]["lid"]
    members, before = [], None
    for node in ("Hca3", "Hca4"):
        rc, out, err = ibsim.run_at(node, WORKLOAD_CLIENT, "join", "--sa-lid", str(lid1), "--groups", "3", timeout=60)
        check(rc == 0, f"workload join at {node}: {rc} {out}{err}")
        members.append(json.loads(out)["port_guid"])

    def sa_check(lid):
        args = ["check", "--sa-lid", str(lid), "--groups", "3"]
        for m in members:
            args += ["--member", m]
        rc, out, err = ibsim.run_at("Hca3", WORKLOAD_CLIENT, *args, timeout=60)
        j = json.loads(out) if out.strip() else None
        return j if j is not None and not j["errors"] else None
    before = wait_until("the workload on head01's SA", 30, lambda: sa_check(lid1))

    def copy_held():
        s = status_json(h2)
        sa = s and s["continuity"]["copies"]["sa_dump"]
        return sa if sa and sa["groups"] == 3 and sa["members"] == 6 else None
    try:
        sa = wait_until("head02 holds head01's SA dump", 60, copy_held)
    except Failure:
        # What each side saw: the sender's files and links, the receiver's copies and refusals.
        for c in (h1, h2):
            s = status_json(c)
            log(f"{c.name} continuity: {json.dumps(s and s.get('continuity'))}")
        log(h1.sh("ls -l --time-style=full-iso /var/log/opensm-sa.dump; tail -n 5 /var/log/opensm-sa.dump",
                  check_rc=False).stdout)
        raise
    log(f"head02's copy: {sa}")
    r = h2.sh("smctl status", check_rc=False)
    check("SA copy: from head01" in r.stdout, f"smctl status on head02: {r.stdout}")
    h1.sh(f"kill -9 {opensm_pid(h1)}")
    wait_until("head02 master", 30, lambda: role(h2) == "master", interval=0.05)
    after = wait_until("head02's SA answers", 30, lambda: sa_check(lid2))
    check(after["groups"] == before["groups"], f"groups before {before['groups']} after {after['groups']}")
    check(after["services"] == before["services"] and after["informs"] == before["informs"],
          f"records before {before} after {after}")
    j = h2.sh("journalctl -u smhad -o cat --no-pager").stdout
    check("continuity: sa_dump generation" in j, "no applied copy in head02's journal")
    # head02's takeover report (doc/takeover-report.md) says the same from its
    # own in-band reads: the copy restored, every group at its MLID, no LFT
    # entry changed, the SA answering again.
    def report():
        s = status_json(h2)
        t = s and s.get("last_takeover")
        return t["report"] if t and t.get("report") else None
    rep = wait_until("head02's takeover report", 60, report)
    log(f"head02's takeover report: {rep['summary']}")
    sa = rep["sa"]
    check(sa["restored"] and sa["copy"]["from"] == "head01", f"report's SA copy: {sa}")
    check(sa["groups_checked"] == 3 and sa["groups_kept"] == 3, f"report's groups: {sa}")
    check(isinstance(sa["outage_ms"], (int, float)), f"report's SA outage: {sa}")
    check(rep["lfts"]["compared"] and rep["lfts"]["changed"] == 0, f"report's LFTs: {rep['lfts']}")
    check(rep["incomplete"] == "", f"report incomplete: {rep['incomplete']}")


def restarts(scratch, root, debs, started):
    """systemctl reload / restart / kill -9 of smhad (Restart=on-failure) and a
    watchdog restart (SIGSTOP): the same OpenSM PID, still MASTER."""
    ibsim = Ibsim(scratch)
    started.append(ibsim)
    guids = {n: ibsim.port_guid(n) for n in ("Hca1", "Hca2")}
    c = Container(scratch, f"smha-r1-{os.getpid()}", root)
    started.append(c)
    install_deb(c, debs[0])
    configure_head(c, ibsim, "Hca1", smha_yaml("head01", guids["Hca1"], "head02", guids["Hca2"]),
                   "0x00000000c0ffee03")
    enable_now(c)
    wait_until("master", 30, lambda: role(c) == "master")
    pid = opensm_pid(c)

    def main_pid():
        return int(unit_prop(c, "MainPID"))

    def same(what):
        wait_until(f"smhad active after {what}", 60,
                   lambda: c.sh("systemctl is-active smhad", check_rc=False).stdout.strip() == "active")
        wait_until(f"master after {what}", 30, lambda: role(c) == "master")
        check(opensm_pid(c) == pid, f"OpenSM PID changed by {what}")
        s = status_json(c)
        check(s["opensm"].get("pid") == pid and s["opensm"].get("supervisor") == "running",
              f"after {what}: {s['opensm']}")

    c.sh("systemctl reload smhad")
    same("systemctl reload")
    c.sh("systemctl restart smhad")
    same("systemctl restart")
    old = main_pid()
    c.sh(f"kill -9 {old}")
    wait_until("a new smhad after kill -9", 30, lambda: main_pid() not in (0, old))
    same("kill -9 of smhad")
    old = main_pid()
    t0 = time.monotonic()
    c.sh(f"kill -STOP {old}")
    wait_until("a new smhad after the watchdog", 40, lambda: main_pid() not in (0, old), interval=0.2)
    log(f"watchdog: SIGSTOPped smhad replaced after {time.monotonic() - t0:.1f}s (WatchdogSec=10s)")
    same("a watchdog restart")
    j = c.sh("journalctl -u smhad -o cat --no-pager").stdout
    check("Watchdog timeout" in j or "watchdog" in j.lower(), "no watchdog message in the journal")


def one_master_head(scratch, root, debs, started, name, key):
    ibsim = Ibsim(scratch)
    started.append(ibsim)
    guids = {n: ibsim.port_guid(n) for n in ("Hca1", "Hca2")}
    c = Container(scratch, f"smha-{name}-{os.getpid()}", root)
    started.append(c)
    install_deb(c, debs[0])
    configure_head(c, ibsim, "Hca1", smha_yaml("head01", guids["Hca1"], "head02", guids["Hca2"]), key)
    enable_now(c)
    wait_until("master", 30, lambda: role(c) == "master")
    return ibsim, c


def upgrade_remove(scratch, root, debs, started):
    """apt install of a higher version over the running master: the maintainer
    scripts restart smhad, OpenSM keeps its PID and mastership; then apt remove
    and apt purge leave / remove what Debian policy says (purge: the conffile,
    /var/lib/smha and /var/log/smha; files the operator made stay)."""
    ibsim, c = one_master_head(scratch, root, debs, started, "u1", "0x00000000c0ffee04")
    pid = opensm_pid(c)
    smhad = int(unit_prop(c, "MainPID"))
    install_deb(c, debs[1])
    check(c.sh("dpkg-query -W -f='${Version}' smha").stdout.endswith("+systemtest1"), "upgrade not installed")
    wait_until("smhad restarted by the upgrade", 30, lambda: int(unit_prop(c, "MainPID")) not in (0, smhad))
    wait_until("master after the upgrade", 30, lambda: role(c) == "master")
    check(opensm_pid(c) == pid, "OpenSM PID changed by the upgrade")
    check(status_json(c)["opensm"].get("adopted") is True, "OpenSM not adopted after the upgrade")
    m = ibsim.sminfo("Hca3")
    check(m and m["state"] == "SMINFO_MASTER" and m["lid"] == status_json(c)["local"].get("lid", m["lid"]),
          f"Hca3 sminfo after the upgrade: {m}")
    # remove: smhad stopped, programs gone, configuration and state kept; OpenSM
    # keeps running (stopping it is the operator's decision: doc/systemd.md).
    c.sh("apt-get remove -y smha")
    check(c.sh("systemctl is-active smhad", check_rc=False).stdout.strip() != "active", "smhad runs after remove")
    for gone in ("/usr/sbin/smhad", "/usr/bin/smctl", "/lib/systemd/system/smhad.service"):
        check(not os.path.lexists(c.root + gone), f"{gone} left after apt remove")
    for kept in ("/etc/smha/smha.yaml", "/var/lib/smha"):
        check(os.path.exists(c.root + kept), f"{kept} removed by apt remove")
    check(c.sh(f"kill -0 {pid}", check_rc=False).returncode == 0, "apt remove stopped OpenSM")
    c.sh("apt-get purge -y smha")
    # The conffile and smhad's state and logs go; what the operator made
    # (the key file, the hook) is not the package's to delete.
    for gone in ("/etc/smha/smha.yaml", "/var/lib/smha", "/var/log/smha"):
        check(not os.path.lexists(c.root + gone), f"{gone} left after apt purge")
    for kept in ("/etc/smha/sm_key", "/etc/smha/hooks/notify"):
        check(os.path.exists(c.root + kept), f"apt purge removed the operator's {kept}")
    check(c.sh("dpkg-query -W -f='${Status}' smha", check_rc=False).stdout.strip() in ("", "unknown ok not-installed"),
          "smha still known to dpkg after purge")


def instance_yaml(name, guid, peer_name, peer_guid):
    """/etc/smha/NAME.yaml of one fabric, the minimal one the README shows: the
    instance's paths, socket and state dir are its own by default."""
    return f"""node:
  name: {name}
  port_guid: {guid}
peers:
  - name: {peer_name}
    port_guid: {peer_guid}
sm_key_file: /etc/smha/sm_key
sa_key_file: /etc/smha/sa_key
"""


def instance_status(c, fabric):
    r = c.sh(f"smctl -f {fabric} status --json", check_rc=False)
    return json.loads(r.stdout).get("data") if r.returncode == 0 else None


def instance_role(c, fabric):
    s = instance_status(c, fabric)
    return s and s.get("role")


def last_event_seq(c, fabric):
    r = c.sh(f"smctl -f {fabric} events -n 1000 --json")
    return json.loads(r.stdout)["data"]["last_seq"]


def two_fabrics(scratch, root, debs, started):
    """Two containers = head01 and head02, each on two fabrics (two ibsim, GUIDs
    of their own), each running smhad@fab0 and smhad@fab1 from the package:
    kill -9 of fab0's master OpenSM moves fab0's mastership only; fab1's OpenSM
    PIDs, roles and events stay as they were. Then an upgrade restarts both
    instances (their OpenSMs adopted), and purge removes each one's state."""
    fabrics = {"fab0": Ibsim(scratch, "fab0"), "fab1": Ibsim(scratch, "fab1", guid_base=0x0002c90300700000)}
    started.extend(fabrics.values())
    guids = {f: {n: ib.port_guid(n) for n in ("Hca1", "Hca2")} for f, ib in fabrics.items()}
    check(guids["fab0"]["Hca1"] != guids["fab1"]["Hca1"], f"the two fabrics share GUIDs: {guids}")
    h1 = Container(scratch, f"smha-m1-{os.getpid()}", root)
    started.append(h1)
    h2 = Container(scratch, f"smha-m2-{os.getpid()}", root)
    started.append(h2)
    # umad2sim's ctl socket is named after the client's PID (see failover()).
    h2.sh("i=0; while [ $i -lt 3000 ]; do /bin/true; i=$((i+1)); done")
    heads = {h1: ("Hca1", "head01", "Hca2", "head02"), h2: ("Hca2", "head02", "Hca1", "head01")}
    for c, (node, me, peer_node, peer) in heads.items():
        install_deb(c, debs[0])
        c.sh("umask 077; printf '%s\\n' 0x00000000c0ffee07 > /etc/smha/sm_key; "
             "printf '%s\\n' 0x00000000d00d5a01 > /etc/smha/sa_key")
        for fab, ib in fabrics.items():
            c.write(f"/etc/smha/{fab}.yaml", instance_yaml(me, guids[fab][node], peer, guids[fab][peer_node]))
            sim_dropin(c, ib, node, unit=f"smhad@{fab}.service", cwd=f"/var/lib/smha/{fab}")
            env = " ".join(f"{k}={v}" for k, v in ib.client_env(node).items())
            r = c.sh(f"cd /var/lib/smha/{fab} && {env} smhad --check-config -c /etc/smha/{fab}.yaml --fabric {fab}",
                     check_rc=False)
            check(r.returncode == 0, f"{c.name}: --check-config of {fab}: {r.stdout}{r.stderr}")
        r = c.sh("systemctl enable --now smhad@fab0 smhad@fab1", check_rc=False, timeout=120)
        check(r.returncode == 0, f"{c.name}: systemctl enable --now smhad@fab0 smhad@fab1: {r.stdout}{r.stderr}")
        if c is h1:
            for fab in fabrics:
                wait_until(f"head01 master on {fab}", 30, lambda f=fab: instance_role(h1, f) == "master")
    for fab in fabrics:
        wait_until(f"head02 standby on {fab}", 30, lambda f=fab: instance_role(h2, f) == "standby")
    # One screen for the head: both fabrics.
    out = h1.sh("smctl status --all").stdout
    log(f"head01: smctl status --all\n{out}")
    rows = json.loads(h1.sh("smctl status --all --json").stdout)
    check([(r["fabric"], r.get("role")) for r in rows] == [("fab0", "master"), ("fab1", "master")],
          f"head01 status --all: {rows}")
    # Each instance its own files, socket and journal identifier; metrics labelled.
    for fab in fabrics:
        s = instance_status(h1, fab)
        check(s.get("fabric") == fab, f"status of smhad@{fab} names fabric {s.get('fabric')!r}")
        for path in (f"/var/lib/smha/{fab}/opensm.pid", f"/var/lib/smha/{fab}/opensm.conf", f"/run/smha/{fab}.sock",
                     f"/var/cache/opensm/{fab}/guid2lid"):
            check(h1.sh(f"test -e {path}", check_rc=False).returncode == 0, f"{path} missing on head01")
        m = h1.sh(f"smctl -f {fab} metrics").stdout
        check(f'smha_role{{fabric="{fab}",node="head01",role="master"}} 1' in m,
              f"smctl -f {fab} metrics: no fabric label: {m[:400]}")
        j = h1.sh(f"journalctl -u smhad@{fab} -o json --no-pager").stdout.splitlines()
        check(any(json.loads(e).get("SYSLOG_IDENTIFIER") == f"smhad@{fab}" for e in j),
              f"no journal entry of smhad@{fab} with SYSLOG_IDENTIFIER smhad@{fab}")
    # The fault: kill -9 of fab0's master OpenSM on head01.
    before = {c: {"pid": opensm_pid(c, "/var/lib/smha/fab1"), "role": instance_role(c, "fab1"),
                  "seq": last_event_seq(c, "fab1")} for c in heads}
    pid0 = opensm_pid(h1, "/var/lib/smha/fab0")
    t0 = time.monotonic()
    h1.sh(f"kill -9 {pid0}")
    wait_until("head02 master on fab0", 20, lambda: instance_role(h2, "fab0") == "master", interval=0.05)
    log(f"kill -9 of head01's fab0 OpenSM: head02 MASTER on fab0 after {time.monotonic() - t0:.2f}s")
    wait_until("head01 back as standby on fab0", 60, lambda: instance_role(h1, "fab0") == "standby")
    m = fabrics["fab1"].sminfo("Hca3")
    check(m and int(m["guid"], 16) == int(guids["fab1"]["Hca1"], 16) and m["state"] == "SMINFO_MASTER",
          f"fab1's master seen from its Hca3 moved: {m}")
    for c in heads:
        after = {"pid": opensm_pid(c, "/var/lib/smha/fab1"), "role": instance_role(c, "fab1"),
                 "seq": last_event_seq(c, "fab1")}
        check(after == before[c], f"{c.name}: fab1 changed by fab0's fault: {before[c]} -> {after}")
    # A third instance configured with fab0's port is refused, naming fab0's file.
    h1.write("/etc/smha/fab2.yaml", instance_yaml("head01", guids["fab0"]["Hca1"], "head02", guids["fab0"]["Hca2"]))
    r = h1.sh("smhad --check-config -c /etc/smha/fab2.yaml --fabric fab2", check_rc=False)
    check(r.returncode == 1 and "is also the node.port_guid of /etc/smha/fab0.yaml (smhad@fab0)" in r.stderr,
          f"--check-config of a second instance on fab0's port: {r.returncode} {r.stdout}{r.stderr}")
    r = h1.sh("systemctl start smhad@fab2", check_rc=False, timeout=60)
    check(r.returncode != 0, "smhad@fab2 started on fab0's port")
    j = h1.sh("journalctl -u smhad@fab2 -o cat --no-pager").stdout
    check("/etc/smha/fab0.yaml" in j, f"smhad@fab2's refusal does not name fab0's file:\n{j[-1500:]}")
    h1.sh("systemctl stop smhad@fab2; systemctl reset-failed smhad@fab2; rm /etc/smha/fab2.yaml", check_rc=False)
    # An upgrade restarts every instance; each adopts its OpenSM (same PIDs,
    # the same roles). Then purge removes each instance's state and cache.
    pids = {fab: opensm_pid(h1, f"/var/lib/smha/{fab}") for fab in fabrics}
    mains = {fab: h1.sh(f"systemctl show -P MainPID smhad@{fab}").stdout.strip() for fab in fabrics}
    install_deb(h1, debs[1])
    for fab in fabrics:
        wait_until(f"smhad@{fab} restarted by the upgrade", 30,
                   lambda f=fab: h1.sh(f"systemctl show -P MainPID smhad@{f}").stdout.strip() not in ("0", mains[f]))
        wait_until(f"head01 {fab} role after the upgrade", 30, lambda f=fab: instance_role(h1, f) is not None)
        check(opensm_pid(h1, f"/var/lib/smha/{fab}") == pids[fab], f"{fab}: OpenSM PID changed by the upgrade")
        check(instance_status(h1, fab)["opensm"].get("adopted") is True, f"{fab}: OpenSM not adopted after the upgrade")
    check(instance_role(h1, "fab1") == "master" and instance_role(h1, "fab0") == "standby",
          f"roles after the upgrade: fab0 {instance_role(h1, 'fab0')}, fab1 {instance_role(h1, 'fab1')}")
    h1.sh("apt-get purge -y smha")
    for fab in fabrics:
        check(h1.sh(f"systemctl is-active smhad@{fab}", check_rc=False).stdout.strip() != "active",
              f"smhad@{fab} runs after purge")
        for gone in (f"/var/lib/smha/{fab}", f"/var/cache/opensm/{fab}"):
            check(h1.sh(f"test -e {gone}", check_rc=False).returncode != 0, f"{gone} left after apt purge")
    for kept in ("/etc/smha/fab0.yaml", "/etc/smha/fab1.yaml", "/etc/smha/sm_key"):
        check(h1.sh(f"test -e {kept}", check_rc=False).returncode == 0, f"apt purge removed the operator's {kept}")


def access(scratch, root, debs, started):
    """A user in group smha gets status and is refused hold; a user outside the
    group gets a clear refusal."""
    ibsim, c = one_master_head(scratch, root, debs, started, "g1", "0x00000000c0ffee05")
    c.sh("useradd -m -G smha alice && useradd -m bob")

    def as_user(user, cmd):
        return c.sh(f"setpriv --reuid={user} --regid={user} --init-groups {cmd}", check_rc=False)

    r = as_user("alice", "smctl status")
    check(r.returncode == 0 and "Role: master" in r.stdout, f"alice (group smha) smctl status: {r.returncode} "
          f"{r.stdout}{r.stderr}")
    r = as_user("alice", "smctl hold --for 60 --reason test")
    check(r.returncode == 7, f"alice smctl hold: exit {r.returncode} (want 7): {r.stdout}{r.stderr}")
    check(status_json(c).get("hold", {}).get("held") is not True, "alice's hold took effect")
    r = as_user("bob", "smctl status")
    check(r.returncode == 7 and ("permission" in (r.stdout + r.stderr).lower() or "smha" in r.stdout + r.stderr),
          f"bob (not in smha) smctl status: exit {r.returncode}: {r.stdout}{r.stderr}")
    log(f"bob's refusal: {(r.stdout + r.stderr).strip()}")


if __name__ == "__main__":
    sys.exit(main({"first_install": first_install, "failed_opensm": failed_opensm,
                   "failover": failover, "restarts": restarts, "upgrade_remove": upgrade_remove,
                   "access": access, "two_fabrics": two_fabrics, "continuity": continuity}))

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# The OCF agent ocf:smha:smhad (packaging/ocf/smhad) on the ibsim lab
# (doc/pacemaker.md, "Testing the agent"). scripts/lab brings up ibsim with
# head01 (MASTER) and head02 (STANDBY); head02's smhad is then handed to the
# agent: the test bed's systemctl and attrd_updater stand-ins
# (tests/pacemaker/testbed) are first on PATH, so the agent runs exactly its
# production code while smhad runs as a plain process under umad2sim.
#   1. ocf-tester (resource-agents) passes: meta-data against the OCF DTD,
#      validate-all, probes, start/stop twice, idempotent start and stop;
#   2. start adopts the OpenSM the last smhad left running (same PID);
#   3. the attribute: 0 while head02 is STANDBY; kill -9 of head01's OpenSM
#      makes head02 MASTER and the notify hook packaging/hooks/pacemaker-attribute
#      (configured in head02's smha.yaml) sets 1 within one poll round of the
#      transition smhad logged; monitor stays 0 (success) through the drill;
#   4. the fence hook in dry-run: a takeover after a kill -9 that the old
#      master's smhad repairs asks for no fence;
#   5. stop on the MASTER hands over first (one planned handover: head01 MASTER
#      afterwards) and sets the attribute 0;
#   6. OpenSM failed for good: monitor returns 1 (OCF_ERR_GENERIC) naming the reason.
#   test_ocf_agent.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
export BUILD_DIR=$2
export PATH=$PATH:/usr/sbin:/sbin
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v ocf-tester >/dev/null || fail "ocf-tester not found: run scripts/install-deps (resource-agents)"
command -v xmllint >/dev/null || fail "xmllint not found: run scripts/install-deps (libxml2-utils)"

work=$(mktemp -d "${TMPDIR:-/tmp}/smha-ocf-test-XXXXXX")
chmod 0755 "$work"   # ocf-tester runs the agent's meta-data as nobody
export SMHA_LAB_DIR=$work/lab SMHA_TESTBED=$work/testbed
lab=$src/scripts/lab
smctl=$BUILD_DIR/daemon/smctl
mkdir -p "$SMHA_TESTBED"

# Every process started here is stopped by PID, also on failure: the test bed's
# smhad (its stop), then the lab (its smhad, ibsim, and every OpenSM named by a
# pidfile, head02's included).
cleanup() {
  local rc=$?
  PATH=$src/tests/pacemaker/testbed:$PATH systemctl stop smhad.service >/dev/null 2>&1 || true
  "$lab" down >/dev/null 2>&1 || true
  if ((rc == 0)); then rm -rf "$work"; else echo "kept $work" >&2; fi
}
trap cleanup EXIT

# The agent and the hooks as installed: root-owned, not group/other-writable
# paths (smhad's hook checks, doc/hooks.md; ocf-tester's run as nobody).
install -d -m 0755 "$work/agent" "$work/hooks"
install -m 0755 "$src/packaging/ocf/smhad" "$work/agent/smhad"
install -m 0755 "$src/packaging/hooks/pacemaker-attribute" "$src/packaging/hooks/pacemaker-fence" "$work/hooks/"
agent=$work/agent/smhad

"$lab" up >"$work/lab-up.out" 2>&1 || { cat "$work/lab-up.out"; fail "lab up"; }
dir=$SMHA_LAB_DIR/Hca2
sock=$dir/ctl/smhad.sock
state_of() { "$smctl" status --json --socket "$1" 2>/dev/null |
  python3 -c 'import json,sys; print((json.load(sys.stdin)["data"].get("local") or {}).get("state"))' || true; }
[[ $(state_of "$sock") == STANDBY ]] || fail "head02 is not STANDBY after lab up"

# Hand head02's smhad to the agent: stop the lab's one (by its recorded PID;
# OpenSM keeps running), then let the test bed start smhad with the same
# configuration plus the two hooks.
read -r _ pid st < <(grep '^smhad-Hca2 ' "$SMHA_LAB_DIR/state")
[[ $(awk '{print $22}' "/proc/$pid/stat") == "$st" ]] || fail "lab's head02 smhad ($pid) not running"
kill -TERM "$pid"
for ((i = 0; i < 200; i++)); do [[ -e /proc/$pid ]] || break; sleep 0.05; done
[[ ! -e /proc/$pid ]] || fail "lab's head02 smhad ($pid) did not stop"
sed -i '/^opensm:/a\  crash_loop_count: 1' "$dir/smha.yaml"
cat >>"$dir/smha.yaml" <<EOF
hooks:
  master: [$work/hooks/pacemaker-attribute, $work/hooks/pacemaker-fence]
  standby: $work/hooks/pacemaker-attribute
  fault: $work/hooks/pacemaker-attribute
EOF
printf 'grace_s 8\nsocket %s\ndry_run yes\nlog_file %s\n' "$sock" "$work/fence.log" >"$work/fence.conf"
# --fabric fab0 as smhad@fab0 runs it: the hooks see SMHA_FABRIC=fab0.
printf '%s\n' "$BUILD_DIR/daemon/smhad" -c "$dir/smha.yaml" --fabric fab0 >"$SMHA_TESTBED/cmd"
# smhad under umad2sim with the umad timeout shim, as the lab runs it (doc/lab.md).
printf '%s\n' "LD_PRELOAD=$BUILD_DIR/tests/ibsim/shim/libsmha_umad_timeout_shim.so:/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so" \
  "SIM_HOST=Hca2" "IBSIM_SOCKNAME=$(cat "$SMHA_LAB_DIR/sockname")" \
  "PATH=$src/tests/pacemaker/testbed:$PATH" "SMHA_FENCE_CONF=$work/fence.conf" "SMHA_SMCTL=$smctl" \
  >"$SMHA_TESTBED/env"
echo "$dir" >"$SMHA_TESTBED/cwd"
echo "$sock" >"$SMHA_TESTBED/socket"
echo "$smctl" >"$SMHA_TESTBED/smctl"

export PATH=$src/tests/pacemaker/testbed:$PATH OCF_ROOT=/usr/lib/ocf
params=(-o instance=fab0 -o socket="$sock" -o smctl="$smctl")
# One agent action as Pacemaker calls it.
ra() { env OCF_RESOURCE_INSTANCE=smhad-fab0 OCF_RESKEY_instance=fab0 OCF_RESKEY_socket="$sock" \
         OCF_RESKEY_smctl="$smctl" OCF_RESKEY_CRM_meta_interval="${interval:-5000}" \
         OCF_RESKEY_CRM_meta_timeout=30000 "$agent" "$@"; }
last_attr() { tail -1 "$SMHA_TESTBED/attributes" 2>/dev/null | awk '{print $2 "=" $3}'; }
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

echo "== 1. ocf-tester"
t0=$(now_ms)
ocf-tester -n smhad-fab0 "${params[@]}" "$agent" >"$work/ocf-tester.out" 2>&1 || { cat "$work/ocf-tester.out"; fail "ocf-tester"; }
cat "$work/ocf-tester.out"
grep -q "passed all tests" "$work/ocf-tester.out" || fail "ocf-tester did not pass all tests"
echo "ocf-tester: $(($(now_ms) - t0)) ms"
# It stopped smhad at the end: the agent says so, and set the attribute 0.
set +e; interval=0 ra monitor; rc=$?; set -e
[[ $rc == 7 ]] || fail "probe after ocf-tester: rc $rc, want 7 (not running)"
[[ $(last_attr) == smha-master-fab0=0 ]] || fail "attribute after stop: $(last_attr)"

echo "== 2. start adopts the running OpenSM"
osm_pid() { sed -n 's/^pid=//p' "$dir/state/opensm.pid"; }
before=$(osm_pid)
[[ -n $before && -e /proc/$before ]] || fail "no OpenSM of head02 running while smhad is stopped"
ra start || fail "start"
ra monitor || fail "monitor after start: rc $?"
adopted=$("$smctl" status --json --socket "$sock" | python3 -c 'import json,sys; o=json.load(sys.stdin)["data"]["opensm"]; print(o["adopted"], o["pid"])')
[[ $adopted == "True $before" ]] || fail "smhad did not adopt OpenSM $before: adopted/pid $adopted"
[[ $(state_of "$sock") == STANDBY && $(last_attr) == smha-master-fab0=0 ]] || fail "head02 $(state_of "$sock"), attribute $(last_attr)"
echo "adopted OpenSM $before; head02 STANDBY, smha-master-fab0=0"

echo "== 3. kill -9 of the master's OpenSM: head02 MASTER, attribute 1 from the hook"
read -r m_pid m_st < <(sed -n 's/^pid=//p; s/^start_time=//p' "$SMHA_LAB_DIR/Hca1/state/opensm.pid" | paste -sd' ')
[[ $(awk '{print $22}' "/proc/$m_pid/stat") == "$m_st" ]] || fail "head01's OpenSM $m_pid not running"
: >"$SMHA_TESTBED/attributes"
t_kill=$(now_ms)
kill -KILL "$m_pid"
# A monitor while head02 takes over (attribute left to the hook here).
OCF_RESKEY_publish_attribute=false ra monitor || fail "monitor during the takeover: rc $?"
while [[ $(state_of "$sock") != MASTER ]]; do
  (($(now_ms) - t_kill < 20000)) || fail "head02 not MASTER 20 s after the kill"
  sleep 0.02
done
while ! grep -q ' smha-master-fab0 1$' "$SMHA_TESTBED/attributes"; do
  (($(now_ms) - t_kill < 20000)) || fail "no smha-master-fab0=1 20 s after the kill"
  sleep 0.02
done
t_attr=$(awk '$3 == 1 {print $1; exit}' "$SMHA_TESTBED/attributes")
# When smhad saw its SM MASTER: its SM_TRANSITION line (local time, ms).
line=$(grep 'SM_TRANSITION from=.* to=MASTER' "$SMHA_TESTBED/smhad.log" | tail -1)
[[ -n $line ]] || fail "no SM_TRANSITION to=MASTER in $SMHA_TESTBED/smhad.log"
t_master=$(date -d "$(cut -d' ' -f1,2 <<<"$line")" +%s%3N)
# The hook runs within one poll round (200 ms in the lab) of the transition.
poll_ms=$(sed -n 's/^ *poll_interval_ms: //p' "$dir/smha.yaml")
((t_attr >= t_master && t_attr - t_master <= poll_ms)) ||
  fail "attribute set $((t_attr - t_master)) ms after smhad logged MASTER (poll ${poll_ms} ms)"
echo "kill -> MASTER (smhad's SM_TRANSITION) $((t_master - t_kill)) ms, -> attribute $((t_attr - t_kill)) ms ($((t_attr - t_master)) ms after the transition)"
ra monitor || fail "monitor on the new MASTER: rc $?"
[[ $(last_attr) == smha-master-fab0=1 ]] || fail "monitor on MASTER left $(last_attr)"
grep -q 'pacemaker-attribute: smha-master-fab0=1 (' "$SMHA_TESTBED/smhad.log" || fail "smhad did not log the hook's line"
# head01's smhad respawns its OpenSM, which comes back STANDBY (sticky failback).
for ((i = 0; i < 400; i++)); do [[ $(state_of "$SMHA_LAB_DIR/Hca1/ctl/smhad.sock") == STANDBY ]] && break; sleep 0.05; done
[[ $(state_of "$SMHA_LAB_DIR/Hca1/ctl/smhad.sock") == STANDBY ]] || fail "head01 not STANDBY again"
ra monitor || fail "monitor after the drill: rc $?"

echo "== 4. fence hook (dry run): the old master's SM answers again, no fence"
for ((i = 0; i < 300; i++)); do [[ -s $work/fence.log ]] && break; sleep 0.05; done
cat "$work/fence.log" 2>/dev/null || fail "no verdict from the fence hook 15 s after the takeover"
grep -q "not fencing head01" "$work/fence.log" || fail "fence hook: no 'not fencing head01' verdict"
! grep -q "would fence" "$work/fence.log" || fail "fence hook would fence a head whose smhad repaired its OpenSM"

echo "== 5. stop on the MASTER hands over first"
calls_before=$(wc -l <"$SMHA_TESTBED/calls")
ra stop || fail "stop: rc $?"
[[ $(state_of "$SMHA_LAB_DIR/Hca1/ctl/smhad.sock") == MASTER ]] || fail "head01 not MASTER after head02's stop"
[[ $(last_attr) == smha-master-fab0=0 ]] || fail "attribute after stop: $(last_attr)"
tail -n +"$((calls_before + 1))" "$SMHA_TESTBED/calls" | grep -qx 'systemctl stop smhad@fab0.service' || fail "stop did not stop smhad@fab0.service"
set +e; ra monitor; rc=$?; set -e
[[ $rc == 7 ]] || fail "monitor after stop: rc $rc"
echo "head01 MASTER after the planned handover; smha-master-fab0=0"

echo "== 6. OpenSM failed for good: monitor is an error naming the reason"
ra start || fail "start again"
# head02's smha.yaml has crash_loop_count 1: one kill -9 and supervision
# gives up (doc/supervision.md).
kill -KILL "$(osm_pid)"
deadline=$(($(now_ms) + 30000))
until [[ $("$smctl" status --json --socket "$sock" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["opensm"]["supervisor"])') == failed ]]; do
  (($(now_ms) < deadline)) || fail "OpenSM supervisor not failed 30 s after the kill"
  sleep 0.1
done
set +e; out=$(ra monitor 2>&1); rc=$?; set -e
[[ $rc == 1 ]] || fail "monitor with OpenSM failed: rc $rc ($out)"
grep -q 'OpenSM failed under smhad@fab0.service: ' <<<"$out" || fail "monitor's reason: $out"
echo "monitor rc 1: $(grep -o 'OpenSM failed under.*' <<<"$out" | head -1)"
ra stop || fail "stop with OpenSM failed"
echo "PASS"

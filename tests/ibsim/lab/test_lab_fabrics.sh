#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# scripts/lab with two fabrics (doc/lab.md): up --fabrics 2 brings fab0 and
# fab1 up, each with its own ibsim and GUIDs, a MASTER and a STANDBY smhad; a
# kill -9 drill on fab0 moves only fab0's mastership (the drill itself fails
# when fab1's states, OpenSM PIDs or last transitions change); a command that
# needs a fabric refuses to guess; down stops every process up started.
#   test_lab_fabrics.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
export BUILD_DIR=$2
SMHA_LAB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/smha-lab-test-XXXXXX")
export SMHA_LAB_DIR
lab=$src/scripts/lab
fail() { echo "FAIL: $*" >&2; exit 1; }
# Every process up started is stopped by its recorded PID, also on failure.
cleanup() {
  local rc=$?
  "$lab" down >/dev/null 2>&1 || true
  if ((rc == 0)); then rm -rf "$SMHA_LAB_DIR"; else echo "lab kept in $SMHA_LAB_DIR" >&2; fi
}
trap cleanup EXIT

"$lab" up --fabrics 2 >"$SMHA_LAB_DIR.up.out" 2>&1 || { cat "$SMHA_LAB_DIR.up.out"; fail "lab up --fabrics 2"; }
rm -f "$SMHA_LAB_DIR.up.out"
grep -c '^ibsim@fab[01] ' "$SMHA_LAB_DIR/state" | grep -qx 2 || fail "not two ibsim in $SMHA_LAB_DIR/state"
grep -c '^smhad-Hca[12]@fab[01] ' "$SMHA_LAB_DIR/state" | grep -qx 4 || fail "not four smhad in $SMHA_LAB_DIR/state"

# Each instance knows its fabric; the two fabrics share no port GUID.
guid() { "$BUILD_DIR/daemon/smctl" status --json --socket "$SMHA_LAB_DIR/$1/$2/ctl/smhad.sock" |
  python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; assert d["fabric"]==sys.argv[1], d["fabric"]; print(d["local"]["guid"])' "$1"; }
g0=$(guid fab0 Hca1) g1=$(guid fab1 Hca1)
[[ -n $g0 && -n $g1 && $g0 != "$g1" ]] || fail "fab0 and fab1 Hca1 GUIDs: '$g0' '$g1'"
"$BUILD_DIR/daemon/smctl" status --socket "$SMHA_LAB_DIR/fab1/Hca1/ctl/smhad.sock" | grep -q '^. smhad@fab1 head01 ' ||
  fail "smctl status does not name the instance smhad@fab1"

# With two fabrics, a command that acts on one must be told which.
if out=$("$lab" drill 2>&1); then fail "drill without --fabric ran"; fi
grep -q 'fabrics fab0 fab1: say which' <<<"$out" || fail "drill without --fabric: $out"
if out=$("$lab" --fabric fab9 console Attached 2>&1); then fail "--fabric fab9 accepted"; fi
grep -q 'fab9: this lab has the fabrics fab0 fab1' <<<"$out" || fail "--fabric fab9: $out"

out=$("$lab" --fabric fab0 drill kill 2>&1) || { echo "$out"; fail "drill on fab0"; }
grep -q "reports MASTER after" <<<"$out" || { echo "$out"; fail "no takeover on fab0"; }
grep -q "fab1 untouched" <<<"$out" || { echo "$out"; fail "fab1 not checked"; }
echo "$out" | grep -E 'MASTER after|STANDBY again|untouched'

# What down must stop: every recorded process and the OpenSM each smhad runs now.
pids=$(awk '{print $2}' "$SMHA_LAB_DIR/state"; sed -n 's/^pid=//p' "$SMHA_LAB_DIR"/fab*/Hca*/state/opensm.pid)
[[ $(wc -w <<<"$pids") == 10 ]] || fail "expected 2 ibsim + 4 smhad + 4 OpenSM, got: $pids"
"$lab" down >/dev/null
for pid in $pids; do
  [[ ! -e /proc/$pid ]] || grep -q '^State:.Z' "/proc/$pid/status" || fail "$pid still runs after down"
done
echo "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# `smctl sminfo ARGS...` runs the helper smctl-sminfo with ARGS unchanged (--help
# included), the one beside smctl's executable first; its exit code is smctl's;
# a missing helper is a clear error. Usage: test_smctl_sminfo_helper.sh SMCTL SMCTL_SMINFO
set -u
smctl=$1
helper=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
check() {  # check WHAT COND...
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what"
    fail=1
  fi
}

# The built pair: the real helper's help and its usage errors.
out=$("$smctl" sminfo --help 2>&1)
check "smctl sminfo --help shows smctl-sminfo's options (got: $out)" grep -q -- '--show-key' <<<"$out"
check "the help names the command as smctl sminfo" grep -q 'smctl sminfo' <<<"$out"
"$smctl" sminfo --lid 0 >/dev/null 2>&1
rc=$?
check "a usage error in the helper's options exits 2 (got $rc)" test "$rc" = 2

# A stand-in helper beside a copy of smctl records what it was given.
mkdir "$dir/bin"
cp "$smctl" "$dir/bin/smctl"
cat >"$dir/bin/smctl-sminfo" <<'SH'
#!/bin/sh
printf '%s\n' "$0" "$@" >"$(dirname "$0")/args"
exit 4
SH
chmod +x "$dir/bin/smctl-sminfo"
"$dir/bin/smctl" sminfo --lid 5 --json --help -- "a b" >/dev/null 2>&1
rc=$?
check "smctl exits with the helper's code (4, got $rc)" test "$rc" = 4
want=$(printf '%s\n' smctl-sminfo --lid 5 --json --help -- "a b")
got=$(tail -n +2 "$dir/bin/args" 2>/dev/null)
check "arguments passed unchanged (got: $(head -1 "$dir/bin/args" 2>/dev/null | xargs basename 2>/dev/null) $got)" \
  test "smctl-sminfo"$'\n'"$got" = "$want"

# Without a helper beside it smctl looks in /usr/libexec/smha; if that is
# missing too, the error names the path.
rm "$dir/bin/smctl-sminfo"
if [[ ! -e /usr/libexec/smha/smctl-sminfo ]]; then
  err=$("$dir/bin/smctl" sminfo 2>&1 >/dev/null)
  rc=$?
  check "a missing helper exits 1 (got $rc)" test "$rc" = 1
  check "a missing helper is named (got: $err)" grep -q 'cannot run /usr/libexec/smha/smctl-sminfo: No such file' <<<"$err"
else
  echo "note: /usr/libexec/smha/smctl-sminfo is installed here; the missing-helper case is not checked"
fi
((fail == 0)) && echo "PASS"
exit $fail

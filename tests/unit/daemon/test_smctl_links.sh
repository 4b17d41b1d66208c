#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# smctl is the operator's client: it carries no smhad code (lib/service) and
# links neither libsystemd, which only smhad needs (sd_notify, journald), nor
# libibumad: `smctl sminfo` runs the helper smctl-sminfo, which does.
# Usage: test_smctl_links.sh SMCTL SMCTL_SMINFO
set -eu
smctl=$1
helper=$2
needed=$(readelf -d "$smctl" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $5); print $5 }')
echo "smctl NEEDED: $(echo $needed)"
if ! grep -q '^libc\.so' <<<"$needed"; then
  echo "FAIL: readelf -d shows no NEEDED entries in $smctl"
  exit 1
fi
if grep -q '^libsystemd' <<<"$needed"; then
  echo "FAIL: smctl links libsystemd"
  exit 1
fi
if grep -q '^libibumad' <<<"$needed"; then
  echo "FAIL: smctl links libibumad"
  exit 1
fi
if ! readelf -d "$helper" | grep -q 'NEEDED.*libibumad'; then
  echo "FAIL: $helper does not link libibumad (it sends smctl sminfo's query)"
  exit 1
fi
daemon=$(nm -C "$smctl" | grep -c 'smha::service::' || true)
if [ "$daemon" != 0 ]; then
  echo "FAIL: smctl carries $daemon symbols of smhad's lib/service, e.g.:"
  nm -C "$smctl" | grep 'smha::service::' | head -5
  exit 1
fi
echo "PASS: no libsystemd, no libibumad, no lib/service code"

#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# Fake opensm that never finishes. Its child keeps stdout open too and records
# its pid in $SMHA_TEST_PIDFILE, so the test can check the whole group died.
echo "OpenSM 0.0.hang"
sleep 600 &
echo $! > "$SMHA_TEST_PIDFILE"
wait

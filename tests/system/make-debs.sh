#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# The system tier's packages: the .deb exactly as scripts/package builds it
# (cpack from the build tree) as OUT/smha.deb, and the same package with a higher
# version as OUT/smha-upgrade.deb (for the upgrade scenario).
#   make-debs.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$(realpath "$1") out=$(realpath -m "$2")
rm -rf "$out"
mkdir -p "$out"
(cd "$build" && cpack -G DEB -B "$out/cpack" >"$out/cpack.log" 2>&1) || { cat "$out/cpack.log"; exit 1; }
deb=$(ls "$out"/cpack/smha_*.deb)
cp "$deb" "$out/smha.deb"
version=$(dpkg-deb --field "$deb" Version)
dpkg-deb -R "$deb" "$out/upgrade"
sed -i "s/^Version: .*/Version: $version+systemtest1/" "$out/upgrade/DEBIAN/control"
dpkg-deb -b --root-owner-group "$out/upgrade" "$out/smha-upgrade.deb" >/dev/null
rm -rf "$out/upgrade" "$out/cpack"
echo "$out/smha.deb ($version), $out/smha-upgrade.deb ($version+systemtest1)"

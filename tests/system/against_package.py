#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
"""Not a test (ctest does not run it): what would the system tier say of
another package, e.g. one built from an older commit? Runs a scenario of
test_system.py with that .deb, recording every failed check instead of
stopping at the first, waits cut to 15 s, and prints each container's unit
state, journal and OpenSM errors (doc/packaging.md, "What the tier finds in the
package before it").
  usage: against_package.py {first_install|failed_opensm} SMHA_DEB [nolisten]
nolisten drops metrics.listen from the configuration (a package whose unit
refuses it would otherwise never start smhad)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import systest  # noqa: E402
import test_system  # noqa: E402

failed = []


def check(cond, what):
    if not cond:
        failed.append(what)
        systest.log(f"CHECK FAILED: {what}")
    return cond


def wait_until(what, timeout, fn, interval=0.1):
    end = time.monotonic() + min(timeout, 15)
    while True:
        try:
            v = fn()
        except Exception:  # noqa: BLE001 (a status that cannot be read yet)
            v = None
        if v:
            return v
        if time.monotonic() > end:
            failed.append(f"timed out: {what}")
            systest.log(f"WAIT FAILED: {what}")
            return None
        time.sleep(interval)


def without_listen(make_yaml):
    def smha_yaml(*a, **kw):
        text = make_yaml(*a, **kw)
        port = a[4] if len(a) > 4 else kw.get("port")
        return text.replace(f"  listen: 127.0.0.1:{port}\n", "") if port else text
    return smha_yaml


def main():
    scenarios = {"first_install": test_system.first_install, "failed_opensm": test_system.failed_opensm}
    if len(sys.argv) < 3 or sys.argv[1] not in scenarios:
        print(__doc__, file=sys.stderr)
        return 2
    test_system.check = check
    test_system.wait_until = wait_until
    if sys.argv[3:] == ["nolisten"]:
        test_system.smha_yaml = without_listen(test_system.smha_yaml)
        test_system.urllib.request.urlopen = lambda *a, **k: (_ for _ in ()).throw(
            RuntimeError("metrics.listen dropped in this variant"))
    root = systest.cached_root()
    started = []
    with systest.scratch_dir("against-" + sys.argv[1]) as scratch:
        try:
            try:
                scenarios[sys.argv[1]](scratch, root, [sys.argv[2]], started)
            except Exception as e:  # noqa: BLE001 (a later step needs what failed)
                failed.append(f"aborted: {type(e).__name__}: {e}")
            for obj in started:
                if isinstance(obj, systest.Container):
                    r = obj.sh("systemctl is-active smhad;"
                               " systemctl show -p StatusText -p NRestarts -p ExecMainStatus smhad;"
                               " journalctl -u smhad -o cat --no-pager | tail -30;"
                               " echo '--- journal lines with Read-only:';"
                               " journalctl -u smhad -o cat --no-pager | grep -c 'Read-only';"
                               " echo '--- opensm.log errors:'; grep -m3 'ERR' /var/log/opensm.log", check_rc=False)
                    systest.log(f"--- {obj.name}\n{r.stdout}{r.stderr}")
        finally:
            for obj in reversed(started):
                obj.stop()
    print("\n".join(["FAILED CHECKS:"] + failed) if failed else "ALL CHECKS PASSED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

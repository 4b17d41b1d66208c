#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# packaging/smctl.bash-completion offers every smctl subcommand and every option
# of each (the expected lists below are the spec; the completion reads them from
# the built smctl's --help). Usage: test_completion.sh SMCTL COMPLETION_FILE
set -u
smctl_bin=$1
completion=$2
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
ln -s "$smctl_bin" "$bindir/smctl"
PATH=$bindir:$PATH
# shellcheck source=/dev/null
source "$completion"

fail=0
# complete WORDS...: the candidates for the last word.
complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMPREPLY=()
    _smctl
    printf '%s\n' "${COMPREPLY[@]}"
}
expect() {  # expect "what" "candidates" word...
    local what=$1 want=$2
    shift 2
    local got
    got=$(complete_words "$@")
    for w in $want; do
        if ! grep -qxF -- "$w" <<<"$got"; then
            echo "FAIL: $what: '$w' not offered (got: $(echo $got))"
            fail=1
        fi
    done
}

expect "subcommands" "sminfo render-config status sms health events metrics handover drill hold release reload" smctl ""
expect "subcommand prefix" "drill" smctl dr
common="--socket --json --timeout --help"
expect "status" "$common --all" smctl status -
expect "sms" "$common" smctl sms -
expect "health" "$common" smctl health -
expect "events" "$common -n --follow -f" smctl events -
expect "metrics" "$common" smctl metrics -
expect "handover" "$common --to" smctl handover -
expect "drill" "$common --to" smctl drill -
expect "hold" "$common --for --reason" smctl hold -
expect "release" "$common" smctl release -
expect "reload" "$common" smctl reload -
expect "sminfo" "--lid --dr --ca --port --guid --timeout --retries --json --show-key" smctl sminfo -
expect "render-config" "--config --diff" smctl render-config -
expect "top-level options" "--help --version -f --fabric" smctl -
# -f before the subcommand: the instances (/etc/smha/NAME.yaml, /run/smha/NAME.sock).
_smctl_etc=$bindir/etc
_smctl_run=$bindir/run
mkdir -p "$_smctl_etc" "$_smctl_run"
touch "$_smctl_etc/smha.yaml" "$_smctl_etc/fab0.yaml" "$_smctl_etc/fab1.yaml"
expect "-f value" "fab0 fab1" smctl -f ""
if complete_words smctl -f "" | grep -qxF smha; then
    echo "FAIL: -f offers smha (the one-fabric file)"
    fail=1
fi
expect "subcommand after -f NAME" "status" smctl -f fab0 st
expect "options after -f NAME" "$common --all" smctl --fabric fab1 status -
if [[ -n $(complete_words smctl events -f "") ]] && complete_words smctl events -f "" | grep -qxF fab0; then
    echo "FAIL: events -f (--follow) completed as a fabric"
    fail=1
fi
expect "--socket value" "/run/smha/smhad.sock" smctl status --socket ""
# Every subcommand smctl --help lists is in the expected list above (a new
# subcommand must be added there and so gets checked).
known=" sminfo render-config status sms health events metrics handover drill hold release reload "
for sub in $(_smctl_subcommands); do
    if [[ $known != *" $sub "* ]]; then
        echo "FAIL: subcommand '$sub' is not covered by this test"
        fail=1
    fi
done
[[ $fail == 0 ]] && echo "all completions offered"
exit $fail

#!/usr/bin/env bash
# The runner must fail loudly when things break. Feed its collectors broken
# runs (fixture logs, then a guest that panics and one that hangs) and check
# that each one produces a FAIL line, and that a clean run produces none.
# Prints one line per check, for scripts/test.sh to count.
#
#   selftest-runner.sh [KBUILD INITRD_DIR]   with a kernel, also boots guests
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

# verdict NAME WANT: WANT is fail or pass; compare with the collectors' count.
verdict() {
    local got=pass; [ "$T_FAIL" -gt 0 ] && got=fail
    if [ "$got" = "$2" ]; then echo "PASS runner/$1"; else echo "FAIL runner/$1: collectors said $got, expected $2"; fi
}

# fixture NAME WANT CONSOLE RESULTS [ktap]: collect a made-up run.
fixture() {
    VM_DIR=$work/$1; mkdir -p "$VM_DIR"
    printf '%b' "$3" > "$VM_DIR/vm.console.log"
    printf '%b' "$4" > "$VM_DIR/vm.results.log"
    T_PASS=0 T_FAIL=0
    vm_collect fixture vm yes > /dev/null
    [ "${5:-}" = ktap ] && vm_collect_ktap fixture vm > /dev/null
    verdict "$1" "$2"
}

ok_results='RR-RESULT mount PASS\nRR-DONE 0\n'
ktap_ok='[    3.1] KTAP version 1\n[    3.1]     # Subtest: rpcrdma_rs_proto\n[    3.1]     ok 1 v1_header_vectors\n[    3.1] ok 1 rpcrdma_rs_proto\n'
fixture clean-run-passes pass '[    1.0] Linux version 7.3.4\n' "$ok_results"
fixture clean-kunit-passes pass "$ktap_ok" "$ok_results" ktap
fixture detects-kunit-failure fail '[    3.1]     # Subtest: rpcrdma_rs_proto\n[    3.1]     not ok 2 v2_header_vectors\n' "$ok_results" ktap
fixture detects-missing-kunit fail '[    1.0] Linux version 7.3.4\n' "$ok_results" ktap
fixture detects-failed-step fail '' 'RR-RESULT mount FAIL mount: Protocol error\nRR-DONE 1\n'
fixture detects-unfinished-guest fail '' 'RR-RESULT mount PASS\n'
fixture detects-warn fail '[   58.7] WARNING: net/core/page_pool.c:843 at page_pool_put_unrefed_netmem+0x82/0x2f0\n' "$ok_results"
fixture detects-oops fail '[   12.0] Oops: general protection fault, probably for non-canonical address\n' "$ok_results"
fixture detects-lockdep fail '[   12.0] WARNING: possible circular locking dependency detected\n' "$ok_results"
fixture detects-kfence fail '[   12.0] BUG: KFENCE: use-after-free read in rpcrdma_rs\n' "$ok_results"
fixture detects-hung-task fail '[  861.2] INFO: task mount.nfs:93 blocked for more than 61 seconds.\n' "$ok_results"
# 7.3 words it so for a task in io_schedule (kernel/hung_task.c).
fixture detects-hung-task-iowait fail '[  185.3] INFO: task cp:858 blocked in I/O wait for more than 61 seconds.\n' "$ok_results"
fixture detects-atomic-sleep fail '[   12.0] BUG: sleeping function called from invalid context at mm/slub.c:4000\n' "$ok_results"

[ $# -ge 2 ] || exit 0
# Real guests: one that panics, one that hangs past its timeout.
vm_prepare "$1" "" "$2"
for inj in panic hang; do
    T_PASS=0 T_FAIL=0
    run_single "inject-$inj" 20 "rr.script=inject-$inj" > /dev/null
    verdict "detects-guest-$inj" fail
done

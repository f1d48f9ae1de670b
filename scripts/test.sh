#!/usr/bin/env bash
# Run every test: host tests of the protocol core, a bounded fuzz run, the
# module build with clippy, then KUnit and the end-to-end scenarios in the VM
# pair. One line per test, then "N passed, N failed"; exit 1 on any failure.
#
#   KERNEL=test      the kernel the VMs boot: test, or kasan (the test kernel
#                    with generic KASAN: scenario timeouts doubled)
#   FUZZ_SECONDS=60  seconds per fuzz target (0 skips fuzzing)
#   ONLY=regex       run only the VM scenarios whose name matches
#   TEST_JOBS=2      VM pairs run at once
#   CHUNKS_BIGSIZE=384  MiB of the big file in ref-chunks (and rs-chunks)
#   SIW_BIGSIZE=128     MiB of the big file in the siw-* cells
#   SIW_PARTS=a,b       the parts the siw-* cells run (tests/vm/cells.sh)
#   HOSTILE_MODES=a,b   the modes hostile-c and hostile-rs try (tests/vm/hostile.sh)
#   SVC_HOSTILE_SERVERS="c rs"  the servers svc-hostile-* runs against (both)
#   SVC_HOSTILE_CASES=a,b       the cases it runs (tests/vm/svc-hostile.sh)
#   SVC_HOSTILE_ABANDON=N       connects it abandons, at least (200)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
KERNEL=${KERNEL:-test}
case $KERNEL in
test) TIME_SCALE=1 ;;
# KASAN checks every access: the guests run about half as fast under TCG.
kasan) TIME_SCALE=2; vm_for_kasan ;;
*) die "KERNEL=$KERNEL: test or kasan" ;;
esac
ONLY=${ONLY:-.}
T_PASS=0 T_FAIL=0
RUN_DIR=${RUN_DIR:-$REPO_DIR/out/test-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RUN_DIR"
# Keep the logs of the last ten runs.
ls -1dt "$REPO_DIR"/out/test-* 2>/dev/null | tail -n +11 | xargs -r rm -rf
started=$SECONDS
cd "$REPO_DIR"

# run_step NAME LOG CMD...: one test line for a whole command.
run_step() {
    local name=$1 log=$2; shift 2
    if "$@" > "$log" 2>&1; then report "$name" PASS
    else report "$name" FAIL "$(tail -n 5 "$log" | tr '\n' ' ')"; fi
}

step "host: protocol core"
if cargo test --workspace --color never > "$RUN_DIR/cargo-test.log" 2>&1; then ct=PASS; else ct=FAIL; fi
n=0
while read -r _ name _ res; do
    n=$((n + 1))
    case $res in ok) report "host/$name" PASS ;; *) report "host/$name" FAIL "$res" ;; esac
done < <(grep -E '^test .* \.\.\. (ok|FAILED|ignored)' "$RUN_DIR/cargo-test.log")
[ $ct = PASS ] && [ $n -gt 0 ] || report host/cargo-test FAIL "$(tail -n 5 "$RUN_DIR/cargo-test.log" | tr '\n' ' ')"
# The RoCEv2 decoder the scenarios' captures go through (vm_collect_wire).
run_step host/rdma-wire-build "$RUN_DIR/rdma-wire-build.log" cargo build -p rdma-wire
run_step host/clippy "$RUN_DIR/clippy.log" cargo clippy --workspace --all-targets --color never -- -D warnings
run_step host/rustfmt "$RUN_DIR/rustfmt.log" sh -c \
    'cargo fmt --all --check && rustfmt --check --edition 2021 rpcrdma_rs_main.rs'
# Fuzzing takes one core for minutes: it runs beside the kernel build and
# the VMs, and is collected at the end.
fuzz_pid=
if [ "$FUZZ_SECONDS" -gt 0 ]; then
    step "host: fuzzing in the background, $FUZZ_SECONDS s per target"
    scripts/fuzz.sh "$FUZZ_SECONDS" > "$RUN_DIR/fuzz.log" 2>&1 &
    fuzz_pid=$!
fi

step "build: $KERNEL kernel and rpcrdma_rs.ko"
if kbuild=$(KERNEL_VARIANT=$KERNEL scripts/kernel-build.sh 2> >(tee "$RUN_DIR/kernel-build.log" >&2)); then
    report build/kernel PASS
else
    report build/kernel FAIL "see $RUN_DIR/kernel-build.log"
    printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"; exit 1
fi
rs_ko=
if KDIR=$kbuild scripts/build-module.sh CLIPPY=1 > "$RUN_DIR/module-build.log" 2>&1; then
    report build/module PASS
    rs_ko=$REPO_DIR/rpcrdma_rs.ko
    # rustc and clippy start lines with "warning:", objtool and modpost
    # put the object's name first.
    warn_re='(^|: )(warning|error)(\[[^]]*\])?:'
    if grep -E "$warn_re" "$RUN_DIR/module-build.log" > /dev/null; then
        report build/module-clippy-clean FAIL "$(grep -m3 -E "$warn_re" "$RUN_DIR/module-build.log" | tr '\n' ' ')"
    else
        report build/module-clippy-clean PASS
    fi
else
    report build/module FAIL "$(tail -n 8 "$RUN_DIR/module-build.log" | tr '\n' ' ')"
fi

# The hostile peers of the hostile-* and svc-hostile-* scenarios: a build
# failure stops here, before any guest boots without them.
if scripts/peer-build.sh > "$RUN_DIR/peer-build.log" 2>&1; then
    report build/peer PASS
else
    report build/peer FAIL "$(tail -n 8 "$RUN_DIR/peer-build.log" | tr '\n' ' ')"
    printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"; exit 1
fi

step "vm: scenarios (logs in $RUN_DIR)"
vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
want() { [[ $1 =~ $ONLY ]]; }
if want runner; then
    step "vm: runner self-test (broken runs must fail)"
    while read -r res name rest; do
        report "${name%:}" "$res" "$rest"
    done < <(scripts/selftest-runner.sh "$kbuild" "$RUN_DIR/runner" | grep -E '^(PASS|FAIL) ')
fi
if want kunit && [ -n "$rs_ko" ]; then
    step "vm: kunit"; run_single kunit $((300 * TIME_SCALE)) "rr.script=kunit"
    vm_collect_ktap kunit vm
fi
# scenario NAME TIMEOUT SERVER_MOD DESCRIPTION "client rr.* words" ["server rr.* words"]
# Declares a scenario; run_scenarios runs them.
S_NAME=() S_T=() S_SWORDS=() S_CWORDS=() S_DESC=()
scenario() {
    want "$1" || return 0
    S_NAME+=("$1") S_T+=("$(($2 * TIME_SCALE))") S_DESC+=("$4") S_CWORDS+=("$5") S_SWORDS+=("rr.mod=$3${6:+ $6}")
}

# run_scenarios: TEST_JOBS VM pairs at a time (default 2), the longest
# (by timeout) first. Scenarios that mostly wait (on recalls, timeouts and
# injected faults: a recall scenario keeps about a quarter of two cores
# busy) are paired with ones that move data (which keep both cores busy),
# so the cores stay busy without two data movers halving each other. Each
# scenario's output is held in RUN_DIR/NAME.out and printed, with its
# results counted, when it ends.
TEST_JOBS=${TEST_JOBS:-2}
WAITING_RE='recall|faults|hostile|reconnect|link-loss|device-removal'
run_scenarios() {
    local -A running=()
    local pending i pid waiting movers pick
    pending=$(for i in "${!S_NAME[@]}"; do echo "${S_T[$i]} $i"; done | sort -s -k1,1nr | cut -d' ' -f2)
    while [ -n "$pending" ]; do
        while [ ${#running[@]} -ge "$TEST_JOBS" ]; do
            sleep 2; reap_scenarios running
        done
        waiting=0 movers=0
        for pid in "${!running[@]}"; do
            if [[ ${running[$pid]} =~ $WAITING_RE ]]; then waiting=$((waiting + 1)); else movers=$((movers + 1)); fi
        done
        # The longest of the kind fewer of which run, else the longest.
        pick=
        for i in $pending; do
            if [[ ${S_NAME[$i]} =~ $WAITING_RE ]]; then
                [ $waiting -lt $movers ] && { pick=$i; break; }
            else
                [ $movers -lt $waiting ] && { pick=$i; break; }
            fi
        done
        [ -n "$pick" ] || pick=${pending%%[$'\n']*}
        pending=$(printf '%s\n' $pending | grep -vx "$pick" || true)
        (
            step "vm: ${S_NAME[$pick]} (${S_DESC[$pick]})"
            run_pair "${S_NAME[$pick]}" "${S_T[$pick]}" "${S_SWORDS[$pick]}" "${S_CWORDS[$pick]}"
        ) > "$RUN_DIR/${S_NAME[$pick]}.out" 2>&1 &
        running[$!]=${S_NAME[$pick]}
    done
    while [ ${#running[@]} -gt 0 ]; do
        sleep 2; reap_scenarios running
    done
}

io="rr.script=nfs-io"
small="rr.size=16 rr.files=200"
# The reference: C client and C server. ref-rdma is the issue 2 baseline.
scenario ref-rdma 480 c "C client, NFSv4.2 over RDMA" "$io rr.mod=c rr.proto=rdma rr.vers=4.2"
scenario ref-tcp 480 none "NFSv4.2 over TCP" "$io rr.mod=none rr.proto=tcp rr.vers=4.2"
# rpcrdma_rs as the client against the C server; 16 MiB and 200 files each
# (ref-rdma moves the 64 MiB baseline).
scenario rs-rdma 600 c "Rust client, NFSv4.2 over RDMA; its rpcrdma trace events" "$io rr.mod=rs rr.proto=rdma rr.vers=4.2 $small rr.trace=1"
scenario rs-reconnect 600 c "Rust client: nfsd restarted under I/O" \
    "rr.script=reconnect rr.mod=rs rr.proto=rdma rr.vers=4.2 rr.faults=nfsd"
# Delegation recall over the backchannel (RFC 8167), the C client as the
# reference: one file, 200 at once, one after a 20 s link loss and one
# after an nfsd restart (a new session, its backchannel set up again).
recall="rr.script=recall rr.proto=rdma rr.vers=4.2 rr.files=200 rr.faults=link,nfsd"
scenario ref-recall 900 c "C client: delegations recalled over the backchannel" "$recall rr.mod=c"
scenario rs-recall 900 c "Rust client: delegations recalled over the backchannel" "$recall rr.mod=rs"
scenario rs-device-removal 480 c "Rust client: device deleted and re-added under a mount; connects failing after the QP" \
    "rr.script=device-removal rr.mod=rs rr.proto=rdma rr.vers=4.2"
# Issue 5, large transfers (tests/vm/chunks.sh): rsize/wsize 1 MiB, a size
# sweep, a big file, 5000 directory entries, long symlinks, big xattrs and
# ACLs; every kind of chunk must be counted and every MR released. With
# default inline thresholds (4 KiB) and with 1 KiB ones (many more calls
# and replies need chunks). The server is always nfsd with rpcrdma.ko.
chunks="rr.script=chunks rr.proto=rdma rr.vers=4.2"
big="rr.bigsize=${CHUNKS_BIGSIZE:-384}"
tiny="rr.modparams=max_inline_read=1024,max_inline_write=1024"
srv1m="rr.maxblksize=1048576"
scenario ref-chunks 900 c "C client: chunks, 1 MiB rsize/wsize, big file" "$chunks rr.mod=c $big" "$srv1m"
scenario ref-chunks-small-inline 900 c "C client: chunks with 1 KiB inline thresholds" "$chunks rr.mod=c $tiny" "$srv1m"
# The same for rpcrdma_rs, plus the Long Call case: with 1 KiB thresholds a
# RENAME of two 255-byte names must go as RDMA_NOMSG with a Position Zero
# Read chunk (tests/vm/nfs-chunks.sh); with 4 request slots, eight direct
# writers must wait for slots on the transport's backlog.
scenario rs-chunks 900 c "Rust client: chunks, 1 MiB rsize/wsize, big file" "$chunks rr.mod=rs $big" "$srv1m"
scenario rs-chunks-small-inline 900 c "Rust client: chunks with 1 KiB inline thresholds" "$chunks rr.mod=rs $tiny" "$srv1m"
# With 4 request slots, so that parallel writers wait on the backlog.
scenario rs-long-calls 600 c "Rust client: Long Calls (Position Zero Read chunk), 1 KiB inline, 4 slots" \
    "rr.script=nfs-chunks rr.mod=rs rr.proto=rdma rr.vers=4.2 $tiny,slot_table_entries=4"
# The server's cable pulled for 20 s under I/O: the host takes its NIC's link
# down through QEMU (scripts/vm.sh, vm_fault_watch); rpcrdma_rs as the
# client must reconnect by itself (rpcrdma.ko's part is in ref-srv-faults).
scenario link-loss-rs 600 c "rs client: server link down 20 s under I/O" \
    "rr.script=reconnect rr.mod=rs rr.proto=rdma rr.vers=4.2 rr.faults=link"
# Issue 11: a hostile server (tests/peer/rpcrdma-peer.c instead of nfsd)
# answers every Call with one kind of malformed reply per port; every mount
# must fail, at once when the reply's XID is readable, with no connection
# that carries no Call (tests/vm/hostile.sh). write-huge (a Write list
# segment of 0x7fffffff bytes) oopses rpcrdma.ko: rpcrdma_rs only. The
# short-* modes retransmit through reconnects until the mount gives up: no
# connection may open after that (defect 5). bcall (issue 12) sends
# backward Calls the client must drop ahead of each Reply. HOSTILE_MODES=a,b
# picks modes.
hmodes=${HOSTILE_MODES:+rr.modes=$HOSTILE_MODES}
scenario hostile-c 900 none "C client against a hostile server" \
    "rr.script=hostile rr.mod=c $hmodes" "rr.script=hostile"
scenario hostile-rs 900 none "Rust client against a hostile server" \
    "rr.script=hostile rr.mod=rs $hmodes" "rr.script=hostile"
# Issue 13: a hostile client (rpcrdma-peer -c, tests/peer/rpcrdma-client.c)
# against nfsd while a well-behaved client (rpcrdma.ko) writes, reads and
# compares on the same server: one connection per case, one malformed
# Call each (bad versions and procedures, short messages, broken chunk
# lists, rkeys never registered, an oversize Send, a burst beyond the
# credits); each answer must be one the server under test may give
# (tests/vm/svc-hostile.sh), the I/O must go on, the mount must work
# afterwards, no oops in either VM. SVC_HOSTILE_SERVERS="c rs" adds the
# Rust server; SVC_HOSTILE_CASES=a,b picks cases. Then (issue 27) 200 or
# more connects abandoned after the REQ or the REP, after which the
# server must serve and hold no more RDMA resources or kmalloc objects
# than before. The server's KFENCE samples an allocation every
# millisecond (the default, 100 ms, would guard a few dozen of the
# allocations the hostile connections make), so that a use after free
# on a path they take is likely to be caught. With the Rust server, the
# VMs get a second link and RDMA device each (rr.links=2, issue 27 defect
# 2): connects stormed at both addresses at once must each be served or
# refused, a mount through each must compare, the server's second device
# must delete within 60 s, and its transport unload leaving no RDMA
# resource (tests/vm/svc-hostile.sh twodev_phase). With one vCPU the two
# devices' requests still reach the listener one at a time (the IB CM runs
# them from a per-CPU workqueue, one work item at a time per CPU), and
# -smp 2 gives these guests no second CPU (no ACPI in the test kernel,
# and the MP table lists one processor): the phase drives the two-device
# path, not the concurrent interleaving.
for srv in ${SVC_HOSTILE_SERVERS:-c rs}; do
    links=
    [ "$srv" != rs ] || links=" rr.links=2"
    scenario "svc-hostile-$srv" 720 "$srv" "hostile client against the $srv server, another client doing I/O; abandoned connects${links:+; connects stormed over two devices}" \
        "rr.script=svc-hostile rr.mod=c rr.server=$srv${SVC_HOSTILE_CASES:+ rr.cases=$SVC_HOSTILE_CASES}${SVC_HOSTILE_ABANDON:+ rr.abandon=$SVC_HOSTILE_ABANDON}$links" \
        "kfence.sample_interval=1$links"
done

# Issue 13: rpcrdma_rs as the nfsd server transport, against the C client
# and against itself.
# The interop matrix (README): each client against each server, one boot
# per pair mounting NFSv4.2, v4.1 and v3 over IPv4 and IPv6
# (tests/vm/matrix.sh). With the Rust server, the server VM then checks
# that rmmod is refused while nfsd listens, works once it stops, and that
# no RDMA resource is left behind, that every backchannel rpc_xprt is freed
# once nfsd stops and none is left after rmmod (issue 27, defect 5: one
# leaked per NFSv4.1+ connection), and that nfsd was woken about once per
# Call (rr.wakeups: at most 1.5 transport enqueues per Call, from its pool
# counters; rpcrdma.ko's server, which leaves XPT_DATA set after taking
# the last Receive, woke a second thread for nothing: about 2.9 here).
matrix="rr.script=matrix"
scenario matrix-c-c 900 c "C client, C server: v4.2, v4.1, v3 over IPv4 and IPv6" "$matrix rr.mod=c"
scenario matrix-rs-c 900 c "Rust client, C server: v4.2, v4.1, v3 over IPv4 and IPv6; RPC-over-RDMA version 1 after one refused version 2 probe per address, no reconnect" "$matrix rr.mod=rs rr.srv=c"
scenario matrix-c-rs 900 rs "C client, Rust server: v4.2, v4.1, v3 over IPv4 and IPv6; clean unload" "$matrix rr.mod=c" "rr.wakeups=1.5 ${SRV_WORDS:-}"
scenario matrix-rs-rs 900 rs "Rust client, Rust server: v4.2, v4.1, v3 over IPv4 and IPv6; clean unload; the server's rpcrdma trace events; RPC-over-RDMA version 2, one connection's packets decoded by tools/rdma-wire" "$matrix rr.mod=rs rr.srv=rs rr.wire=1" "rr.wakeups=1.5 rr.trace=1 ${SRV_WORDS:-}"
# Issue 28: rpcrdma_rs installed in place of rpcrdma.ko as the admin guide
# says (make install's scripts/install.sh) in both VMs, nothing loaded by
# hand: nfsd's rdma listener and mount -o proto=rdma, then rdma6, must
# load rpcrdma_rs through the kernel's modprobe, and carry 16 MiB
# compared byte for byte; after uninstall in both, nfsd and the next
# mount load rpcrdma.ko, which reads the same file back
# (tests/vm/install-rs.sh, server.sh swap_to_c).
scenario install-rs 480 install "installed in place of rpcrdma.ko in both VMs: autoloaded by nfsd and mount; uninstalled: rpcrdma.ko again" \
    "rr.script=install-rs rr.size=16"
# Issue 28: iWARP. The same cells over siw (software iWARP: RDMA over
# TCP, connections set up through MPA, RDMA Read sinks registered) on
# both VMs instead of rxe, one boot per client/server pair
# (tests/vm/cells.sh). siw-rs-rs, the Rust transport as both client and
# server: the chunk scenario with a big file and with 1 KiB inline
# thresholds, the recall scenario (one, 200 at once, after an nfsd
# restart), then the interop matrix's cells (v4.2, v4.1, v3 over IPv4 and
# IPv6: data, files, a recall each) and the server's clean unload. The
# two cross cells, against rpcrdma.ko on the other end, run the matrix's
# cells: the three boots of every part took 21 minutes of VM time, past
# make test's budget (SIW_PARTS=a,b sets the parts of all three). Every
# mount must be on siw0 (nfs-mount.sh transport_in_use).
siw="rr.rdma=siw rr.script=cells rr.bigsize=${SIW_BIGSIZE:-128} rr.faults=nfsd"
siw_all="$siw rr.parts=${SIW_PARTS:-chunks,chunks-small-inline,recall,matrix}"
siw_cross="$siw rr.parts=${SIW_PARTS:-matrix}"
scenario siw-rs-rs 1800 rs "Rust client, Rust server over siw (iWARP): chunks, small inline, recall, matrix" \
    "$siw_all rr.mod=rs" "rr.rdma=siw $srv1m"
scenario siw-rs-c 1800 c "Rust client, C server over siw (iWARP): the matrix" \
    "$siw_cross rr.mod=rs" "rr.rdma=siw $srv1m"
scenario siw-c-rs 1800 rs "C client, Rust server over siw (iWARP): the matrix" \
    "$siw_cross rr.mod=c" "rr.rdma=siw $srv1m"
# Large transfers against the Rust server: chunks of every kind, 1 MiB
# rsize/wsize, the big file, with the C client and with the Rust client;
# 1 KiB client thresholds; Long Calls from the Rust client.
scenario srv-chunks 900 rs "C client, Rust server: chunks, 1 MiB rsize/wsize, big file; the server's Read, Write and Reply chunk trace events" "$chunks rr.mod=c $big rr.teardown=1" "$srv1m rr.trace=chunks"
scenario srv-chunks-small-inline 900 rs "C client, Rust server: chunks with 1 KiB inline thresholds" "$chunks rr.mod=c $tiny" "$srv1m"
scenario srv-chunks-rs 900 rs "Rust client, Rust server: chunks, 1 MiB rsize/wsize, big file" "$chunks rr.mod=rs $big" "$srv1m"
scenario srv-long-calls 600 rs "Rust client, Rust server: Long Calls, 1 KiB inline, 4 slots" \
    "rr.script=nfs-chunks rr.mod=rs rr.proto=rdma rr.vers=4.2 $tiny,slot_table_entries=4"
# Issue 14: delegations recalled over the Rust server's backchannel, by
# the C client and by the Rust client: one file, 200 at once, one after a
# 20 s link loss and one after an nfsd restart (tests/vm/recall.sh).
# The C client's run adds 1000 more callbacks (5 rounds of 200 new
# files), with the server's unreclaimable slab measured before and after.
scenario srv-recall-c 1200 rs "C client, Rust server: delegations recalled over the backchannel; 1000 callbacks" "$recall rr.mod=c rr.rounds=5"
scenario srv-recall-rs 900 rs "Rust client, Rust server: delegations recalled over the backchannel" "$recall rr.mod=rs"
# The server's own faults under a C client's write-read-compare loop, in
# one boot (tests/vm/srv-faults.sh): nfsd threads 8 -> 2 -> 16 -> 8, nfsd
# restarted (listeners removed and re-created), the server's cable pulled
# for 20 s, nfsd restarted while the server's link drops the IB CM's
# messages (the GSI QP must stay in RTS: a rxe bug the test kernel carries
# a fix for, scripts/kernel-patches/0001-*, left it deaf and clients out
# for good), the server's rxe device deleted and added back 10 s later
# (connections released, the wildcard listener listening on the new
# device); the client must come back by itself, counting a reconnect,
# after each of the last four; then a clean unload with RDMA resources
# back to their counts. ref-srv-faults runs the same against rpcrdma.ko's
# server: the behaviour to match, and the C client's reconnect checks.
# srv-faults then has the server's RDMA listener, bound to its address,
# see a bond failover and back (rr.bond=1: a second NIC, tests/vm/
# srv-faults.sh bond_failover); a new mount must get through. Not
# ref-srv-faults: rpcrdma.ko's listener dies there (its new id collides
# with the old one's address, EADDRINUSE: "Listener dead, address change
# failed", after a lockdep splat for the new id it destroys in the old
# one's handler), as a run with rr.bond=1 added to it showed. Last, once
# the server unloaded its transport (rr.udlost=1): a UD send whose source
# GID went after its address handle was made (tests/peer/ud-lost.c, what
# the CM's messages meet when the node's address goes) must be a lost
# datagram, counted in rxe's send_err, and its QP must stay in RTS and go
# on receiving (rxe_ud_send_lost_keeps_qp: fails without 0003-*, rxe
# moved the QP to ERR for good).
faults="rr.script=srv-faults rr.mod=c rr.proto=rdma rr.vers=4.2 rr.size=8"
scenario srv-faults 600 rs "C client, Rust server: thread counts, nfsd restart, link loss, lost CM messages, device removal under I/O; the listener through a bond failover; a UD send from a gone GID" "$faults rr.bond=1" "rr.bond=1 rr.udlost=1"
scenario ref-srv-faults 600 c "C client, C server: thread counts, nfsd restart, link loss, lost CM messages, device removal under I/O" "$faults"
# make soak's smoke (scripts/soak.sh, tests/vm/soak.sh): Rust client and
# Rust server, 5 minutes of mixed I/O (streaming write-read-compare, small
# files, a delegation recalled each minute) while 3 server link outages of
# 5-30 s, an nfsd restart, a server and a client rxe removal and a umount -f
# of a busy second mount run; each fault must be survived (I/O moving within
# 180 s of its end), with no data or I/O error, then both ends unload clean.
scenario soak-smoke-rs 900 rs "Rust client, Rust server: make soak's smoke, a few faults of each kind under mixed I/O" \
    "rr.script=soak rr.mod=rs rr.proto=rdma rr.vers=4.2 rr.size=8 rr.soak=5,3,1,1,1,1,1,180" "rr.soak=1"
run_scenarios
if [ -n "$fuzz_pid" ]; then
    step "host: waiting for the fuzzer"
    wait "$fuzz_pid"; frc=$?
    while read -r _ target res rest; do
        case $res in ok) report "fuzz/${target%:}" PASS ;; *) report "fuzz/${target%:}" FAIL "$res $rest" ;; esac
    done < <(grep -E '^fuzz [^ ]+: ' "$RUN_DIR/fuzz.log")
    [ $frc -eq 0 ] || report fuzz/run FAIL "$(tail -n 5 "$RUN_DIR/fuzz.log" | tr '\n' ' ')"
fi

rm -f "$RUN_DIR"/*.cpio
echo "elapsed $((SECONDS - started)) s; logs in $RUN_DIR"
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"
[ "$T_FAIL" -eq 0 ] && [ "$T_PASS" -gt 0 ]

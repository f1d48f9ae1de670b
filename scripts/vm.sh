# Host side of the VM pair; sourced by scripts/test.sh and scripts/demo.sh.
# shellcheck shell=bash
#
# Each scenario boots fresh VMs from the cached kernel and base initramfs plus
# an overlay (modules and tests/vm scripts). The two VMs share one link
# (VM_LINK below) and nothing else; each gets rxe on its virtio-net.
# Guests report on their second serial port (results.log); the kernel console
# goes to console.log, which is scanned for oopses, WARNs, lockdep and KFENCE
# reports and hung tasks. Each QEMU has a QMP socket (NAME.qmp) through which
# the host injects the faults a guest cannot inject on itself. Unix sockets
# live in VM_SOCKDIR, a short directory in /tmp made per scenario: a unix
# socket's path is limited to 107 bytes, too few for VM_DIR.

VM_MEM_SERVER=${VM_MEM_SERVER:-1536}
VM_MEM_CLIENT=${VM_MEM_CLIENT:-1024}
VM_ACCEL=${VM_ACCEL:-tcg}
# The link between the two guests of run_pair. tcp: QEMU's socket netdev over
# 127.0.0.1. QEMU (7.2) sets TCP_NODELAY on the connecting side only, so the
# listening (server) side's frames go through Nagle: a frame the server
# sends while an earlier one is unacknowledged waits for the client host's
# delayed ACK, about 40 ms. Synchronous RPCs then take ~45-48 ms whatever
# the transport does (fio: 4 KiB reads at iodepth 1, file creates and
# GETATTRs all at ~20/s; ~130, ~70 and ~220/s on unix). unix: QEMU's stream
# netdev over a unix socket, which has no Nagle and no delayed ACKs: the
# default (rs-rdma went from 70 s to 25 s).
VM_LINK=${VM_LINK:-unix}
VM_APPEND_BASE="console=ttyS0 panic=-1 loglevel=7 printk.devkmsg=on"

# Kernel log lines that fail a scenario whatever its guest said.
BAD_LOG='Kernel panic|BUG:|WARNING:|Oops|general protection fault|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|KFENCE:|blocked( in I/O wait)? for more than|soft lockup|hard LOCKUP|UBSAN:|panicked at|list_add corruption|list_del corruption|Call Trace:'

# vm_for_kasan: guests for the kasan kernel. A third more memory: KASAN's
# shadow takes an eighth of it and its quarantine and redzones more (with
# the usual sizes, nfsd's state shrinker ran during srv-recall-c's storms
# and recalled the delegations the test counts, CB_RECALL_ANY). 4-level
# paging: with QEMU's -cpu max the guests run 5-level (LA57), and about one
# boot in twenty took an interrupt in early boot whose irq descriptor's
# lock KASAN called a wild access (ff11..., LA57's direct map), before any
# module was loaded.
vm_for_kasan() {
    VM_MEM_SERVER=$((VM_MEM_SERVER * 4 / 3)) VM_MEM_CLIENT=$((VM_MEM_CLIENT * 4 / 3))
    VM_APPEND_BASE="$VM_APPEND_BASE no5lvl"
}

# vm_prepare KBUILD RS_KO RUNDIR: stage kernel, initramfs and the overlay.
# VM_EXTRA_BINS: host binaries to add to the overlay with their libraries
# (the bench's perf), kept out of the tests' base initramfs.
vm_prepare() {
    local kbuild=$1 rs_ko=$2
    VM_RUNDIR=$3
    VM_KERNEL=$kbuild/arch/x86/boot/bzImage
    mkdir -p "$VM_RUNDIR"
    local base ov
    base=$("$REPO_DIR/scripts/initramfs.sh")
    ov=$(mktemp -d)
    mkdir -p "$ov/modules" "$ov/scenario"
    vm_modules_tree "$ov" "$kbuild"
    ln "$ov/lib/modules/$(cat "$kbuild/include/config/kernel.release")/kernel/net/sunrpc/xprtrdma/rpcrdma.ko" "$ov/modules/"
    if [ -n "$rs_ko" ]; then
        cp "$rs_ko" "$ov/modules/rpcrdma_rs.ko"
        # What an administrator has after `make module`: the built
        # module beside scripts/install.sh (tests/vm/install-rs.sh).
        mkdir -p "$ov/src/rpcrdma_rs/scripts"
        ln "$ov/modules/rpcrdma_rs.ko" "$ov/src/rpcrdma_rs/rpcrdma_rs.ko"
        cp "$REPO_DIR/scripts/install.sh" "$ov/src/rpcrdma_rs/scripts/"
    fi
    cp "$REPO_DIR"/tests/vm/*.sh "$REPO_DIR"/tests/vm/*.awk "$ov/scenario/"
    # The guests check their own logs with the same patterns (lib.sh).
    printf '%s\n' "$BAD_LOG" > "$ov/scenario/bad-log.re"
    # The kernel's HZ, to read delays in jiffies (reconnect.sh).
    sed -n 's/^CONFIG_HZ=//p' "$kbuild/.config" > "$ov/scenario/kernel-hz"
    # Inputs a run made for its scenarios (scripts/alloc-faults.sh's sites).
    # shellcheck disable=SC2086 # a list of paths
    [ -z "${VM_SCENARIO_FILES:-}" ] || cp $VM_SCENARIO_FILES "$ov/scenario/"
    # shellcheck disable=SC2086 # a list of paths
    copy_with_libs "$ov" ${VM_EXTRA_BINS:-}
    # The hostile RPC-over-RDMA server (tests/peer) and libibverbs' rxe
    # and siw providers, which it loads by name from libibverbs.d.
    # A peer that does not build stops the run here, not as "rpcrdma-peer:
    # not found" in the guests of the scenarios that need it.
    local peer
    peer=$("$REPO_DIR/scripts/peer-build.sh") || { rm -rf "$ov"; die "tests/peer does not build"; }
    copy_with_libs "$ov" "$peer=/usr/bin/rpcrdma-peer" \
        "$(dirname "$peer")/nfsd-listener=/usr/bin/nfsd-listener" \
        "$(dirname "$peer")/ud-lost=/usr/bin/ud-lost" \
        /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so \
        /usr/lib/x86_64-linux-gnu/libibverbs/libsiw-rdmav*.so
    mkdir -p "$ov/etc/libibverbs.d"
    cp /etc/libibverbs.d/rxe.driver /etc/libibverbs.d/siw.driver "$ov/etc/libibverbs.d/"
    (cd "$ov" && find . -print0 | cpio --null -o -H newc --quiet) > "$VM_RUNDIR/overlay.cpio"
    rm -rf "$ov"
    cat "$base" "$VM_RUNDIR/overlay.cpio" > "$VM_RUNDIR/initrd.cpio"
}

# vm_modules_tree ROOT KBUILD: the kernel's modules (rpcrdma.ko among
# them: the test kernel builds SUNRPC_XPRT_RDMA=m) in ROOT/lib/modules/KVER
# as kbuild's modules_install lays them out, and depmod's indexes, so
# that the kernel's request_module finds them through the guest's
# /sbin/modprobe (kmod, scripts/initramfs.sh). Done here rather than by
# modules_install, which would write into the shared kernel build cache.
vm_modules_tree() {
    local root=$1 kbuild=$2 kver m
    kver=$(cat "$kbuild/include/config/kernel.release")
    local dst=$root/lib/modules/$kver
    mkdir -p "$dst"
    while read -r m; do
        m=${m%.o}.ko
        mkdir -p "$dst/kernel/$(dirname "$m")"
        cp "$kbuild/$m" "$dst/kernel/$m"
    done < "$kbuild/modules.order"
    sed 's:^\(.*\)\.o$:kernel/\1.ko:' "$kbuild/modules.order" > "$dst/modules.order"
    cp "$kbuild/modules.builtin" "$kbuild/modules.builtin.modinfo" "$dst/"
    /sbin/depmod -b "$root" "$kver"
}

# vm_start NAME MAC NETDEV "rr.* words" MEM: boot one guest in the background;
# NETDEV is the -netdev backend and its options, without the id.
# With rr.bond=1 among its words the server gets a second NIC (eth1, its
# own MAC) on a QEMU hub port with nothing else on the hub: a bond's
# backup slave whose packets go nowhere (server.sh bond_failover).
# With rr.links=2 among the words of both guests, each gets a second NIC
# (eth1) on a second stream link between them (VM_SOCKDIR/link2, the
# server listening on it as on the first): two RDMA devices a side, one
# per link (lib.sh net_up: rxe1 on 192.0.3.0/24; svc-hostile.sh
# twodev_phase).
# Big receive buffers without merging (mrg_rxbuf=off, MTU 9000) keep
# virtio-net off page_pool: in 7.3, rxe frees dropped skbs with IRQs
# disabled, which page_pool WARNs about (seen when the peer's link flaps).
# That bug is rxe's, not the transport's; the log check stays strict.
# VM_QEMU_ARGS: more QEMU options (the bench's clock, see CLOCK there).
vm_start() {
    local name=$1 mac=$2 netdev=$3 words=$4 mem=$5 dir=$VM_DIR nic2=()
    case "$name $words " in
    "server "*" rr.bond=1 "*) nic2=(-netdev hubport,id=n1,hubid=1
        -device "virtio-net-pci,netdev=n1,mac=${mac%:*}:11,mrg_rxbuf=off,host_mtu=9000") ;;
    esac
    local side=off
    [ "$name" != server ] || side=on
    case " $words " in
    *" rr.links=2 "*) nic2=(-netdev "stream,server=$side,addr.type=unix,addr.path=$VM_SOCKDIR/link2,id=n1"
        -device "virtio-net-pci,netdev=n1,mac=${mac%:*}:2${mac##*:0},mrg_rxbuf=off,host_mtu=9000") ;;
    esac
    # shellcheck disable=SC2086 # VM_QEMU_ARGS is a list of options
    qemu-system-x86_64 -accel "$VM_ACCEL" -cpu max -smp 1 -m "$mem" \
        -nodefaults -no-reboot -display none \
        -kernel "$VM_KERNEL" -initrd "$VM_RUNDIR/initrd.cpio" \
        -append "$VM_APPEND_BASE $words" \
        -serial "file:$dir/$name.console.log" -serial "file:$dir/$name.results.log" \
        -netdev "$netdev,id=n0" -device "virtio-net-pci,netdev=n0,mac=$mac,mrg_rxbuf=off,host_mtu=9000" \
        "${nic2[@]}" \
        -qmp "unix:$VM_SOCKDIR/$name.qmp,server=on,wait=off" \
        ${VM_QEMU_ARGS:-} \
        > "$dir/$name.qemu.log" 2>&1 &
    echo $!
}

# vm_qmp SOCKET COMMAND [JSON-ARGUMENTS]: run one QMP command, fail on an
# error reply. QMP rather than the human monitor: its replies are JSON.
vm_qmp() {
    python3 - "$@" <<'PY'
import json, socket, sys
path, cmd = sys.argv[1], sys.argv[2]
args = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(30)
sock.connect(path)
f = sock.makefile("rw")
f.readline()  # greeting
for c, a in (("qmp_capabilities", {}), (cmd, args)):
    f.write(json.dumps({"execute": c, "arguments": a}) + "\n")
    f.flush()
    while True:  # skip asynchronous events
        msg = json.loads(f.readline())
        if "return" in msg or "error" in msg:
            break
    if "error" in msg:
        sys.exit(c + ": " + msg["error"].get("desc", str(msg["error"])))
PY
}

# vm_fault_watch: serve the server's "RR-FAULT link SECS" requests, each
# once, until killed. "link" pulls the server's cable: QEMU's set_link drops
# its NIC's frames both ways and the guest sees only carrier loss. When the
# guest downed eth0 itself instead, rxe's port, GIDs and routes went through
# down and up, and on a loaded host both clients' connection requests then
# went unanswered for good. What happened goes to host.log, in host time.
vm_fault_watch() {
    local log=$VM_DIR/server.results.log qmp=$VM_SOCKDIR/server.qmp hlog=$VM_DIR/host.log
    local handled=0 n tag kind secs
    while sleep 1; do
        n=0
        while read -r tag kind secs _; do
            [ "$tag" = RR-FAULT ] || continue
            n=$((n + 1))
            [ $n -gt $handled ] || continue
            handled=$n
            case $kind in
            link)
                secs=${secs:-20}
                if ! vm_qmp "$qmp" set_link '{"name": "n0", "up": false}' >> "$hlog" 2>&1; then
                    echo "$(date +%T) error: set_link n0 off failed" >> "$hlog"
                    continue
                fi
                echo "$(date +%T) server link down (set_link n0 off) for $secs s" >> "$hlog"
                sleep "$secs"
                if vm_qmp "$qmp" set_link '{"name": "n0", "up": true}' >> "$hlog" 2>&1; then
                    echo "$(date +%T) server link up (set_link n0 on)" >> "$hlog"
                else
                    echo "$(date +%T) error: set_link n0 on failed" >> "$hlog"
                fi
                ;;
            *) echo "$(date +%T) error: unknown fault '$kind'" >> "$hlog" ;;
            esac
        done < <(tr -d '\r' < "$log" 2>/dev/null)
    done
}

free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        ss -Hltn "sport = :$p" | grep -q . || { echo $p; return; }
    done
}

# report NAME PASS|FAIL [detail]: one line per test, counted for the summary.
report() {
    if [ "$2" = PASS ]; then
        T_PASS=$((T_PASS + 1)); printf 'PASS %s\n' "$1"
    else
        T_FAIL=$((T_FAIL + 1)); printf 'FAIL %s%s\n' "$1" "${3:+: $3}"
    fi
}

# reap_scenarios ARRAY: print and count the run_pairs of ARRAY (pid ->
# name, each held in RUN_DIR/NAME.out while it ran beside others) that
# have ended, and forget them.
reap_scenarios() {
    local -n jobs_=$1
    local pid line
    for pid in "${!jobs_[@]}"; do
        ! kill -0 "$pid" 2>/dev/null || continue
        wait "$pid" 2>/dev/null
        while IFS= read -r line; do
            case $line in
            "PASS "*) T_PASS=$((T_PASS + 1)) ;;
            "FAIL "*) T_FAIL=$((T_FAIL + 1)) ;;
            esac
            printf '%s\n' "$line"
        done < "$RUN_DIR/${jobs_[$pid]}.out"
        unset "jobs_[$pid]"
    done
}

# Turn a guest's results.log into test lines; fail if it did not finish.
vm_collect() {
    local scen=$1 name=$2 need_done=$3 log=$VM_DIR/$2.results.log tag tname status detail
    while read -r tag tname status detail; do
        if [ "$tag" = RR-RESULT ]; then report "$scen/$tname" "$status" "$detail"; fi
    done < <(tr -d '\r' < "$log" 2>/dev/null)
    if [ "$need_done" = yes ] && ! grep -q '^RR-DONE' "$log" 2>/dev/null; then
        report "$scen/$name-finished" FAIL "guest did not finish (hang, panic or timeout); see $VM_DIR/$name.console.log"
    fi
    local bad
    # The stacks fault injection dumps (scripts/alloc-faults.sh) are not
    # reports.
    bad=$(awk -f "$REPO_DIR/tests/vm/fi-strip.awk" "$VM_DIR/$name.console.log" 2>/dev/null |
        grep -aE "$BAD_LOG" | head -n 3 | tr '\n' ' ' || true)
    if [ -n "$bad" ]; then
        report "$scen/$name-kernel-log" FAIL "$bad"
    else
        report "$scen/$name-kernel-log" PASS
    fi
}

# vm_collect_wire SCEN NAME: each capture guest NAME sent (an "RR-PCAP TAG"
# line, the pcap in "RR-B64" lines, "RR-PCAP-END") decoded on the host by
# tools/rdma-wire (built by scripts/test.sh) into TAG.pcap and
# TAG.wire.txt: it must hold Calls and Replies and nothing flagged; every
# message version 1, or, between our client and our server
# (matrix-rs-rs), which settle on RPC-over-RDMA version 2 (issue 29),
# version 2 messages (the backchannel's stay version 1).
vm_collect_wire() {
    local scen=$1 log=$VM_DIR/$2.results.log tag pcap out sum rc bad want=1
    case $scen in matrix-rs-rs) want=2 ;; esac
    local wire=$REPO_DIR/target/debug/rdma-wire
    for tag in $(tr -d '\r' < "$log" 2>/dev/null | sed -n 's/^RR-PCAP \([A-Za-z0-9._-]*\)$/\1/p'); do
        pcap=$VM_DIR/$tag.pcap out=$VM_DIR/$tag.wire.txt
        if ! tr -d '\r' < "$log" | awk -v t="$tag" '$1 == "RR-PCAP" && $2 == t { on = 1; next }
                on && $1 == "RR-PCAP-END" { exit } on && $1 == "RR-B64" { print $2 }' |
                base64 -d > "$pcap" 2>/dev/null; then
            report "$scen/wire-$tag" FAIL "capture did not come out whole; see $log"
            continue
        fi
        rc=0; "$wire" --summary "$pcap" > "$out" 2>&1 || rc=$?
        sum=$(grep -m1 '^summary:' "$out" || true)
        echo "  $scen: rdma-wire $tag: ${sum:-no summary}"
        wf() { echo "$sum" | sed -n "s/.* $1 \([0-9]*\) .*/\1/p"; }
        bad=
        [ $rc -eq 0 ] || bad="exit $rc:$(grep -m 3 '!!' "$out" | tr '\n' ' ')"
        [ "$(wf calls)" -gt 0 ] 2>/dev/null || bad="$bad no Call decoded"
        [ "$(wf replies)" -gt 0 ] 2>/dev/null || bad="$bad no Reply decoded"
        if [ $want = 2 ]; then
            [ "$(wf v2)" -gt 0 ] 2>/dev/null || bad="$bad no version 2 message"
            # Callbacks too: the backward direction is version 2's.
            [ "$(wf v1)" = 0 ] || bad="$bad $(wf v1) version 1 messages"
        else
            [ "$(wf v2)" = 0 ] || bad="$bad $(wf v2) version 2 messages"
            [ "$(wf v1)" = "$(wf messages)" ] || bad="$bad not every message version 1"
        fi
        [ "$(wf flagged)" = 0 ] || bad="$bad $(wf flagged) flagged"
        if [ -z "$bad" ]; then report "$scen/wire-$tag" PASS
        else report "$scen/wire-$tag" FAIL "$bad; see $out"; fi
    done
}

# Parse our KUnit suites (rpcrdma_rs*) from a console log: a test line per case.
vm_collect_ktap() {
    local scen=$1 log=$VM_DIR/$2.console.log suite='' n=0 line
    while IFS= read -r line; do
        line=$(printf '%s' "$line" | sed -E 's/^\[[^]]*\] //; s/\r$//')
        case $line in
        *"# Subtest: "*) suite=${line##*# Subtest: } ;;
        "    ok "* | "    not ok "*)
            case $suite in rpcrdma_rs*) ;; *) continue ;; esac
            n=$((n + 1))
            local case_name
            case_name=$(printf '%s' "$line" | sed -E 's/^ *(not )?ok [0-9]+ ([^ #]+).*/\2/')
            case $line in
            "    ok "*"# SKIP"*) report "$scen/kunit/$suite/$case_name" FAIL "skipped" ;;
            "    ok "*) report "$scen/kunit/$suite/$case_name" PASS ;;
            *) report "$scen/kunit/$suite/$case_name" FAIL "see $log" ;;
            esac
            ;;
        esac
    done < "$log"
    [ $n -gt 0 ] || report "$scen/kunit" FAIL "no KUnit results in $log"
}

# run_single SCEN TIMEOUT "rr.* words"
run_single() {
    local scen=$1 t=$2 words=$3 pid rc=0
    VM_DIR=$VM_RUNDIR/$scen; rm -rf "$VM_DIR"; mkdir -p "$VM_DIR"
    VM_SOCKDIR=$(mktemp -d /tmp/rr-vm.XXXXXX)
    local port; port=$(free_port)
    pid=$(vm_start vm 52:54:00:00:00:09 "socket,listen=127.0.0.1:$port" "rr.role=single $words" "$VM_MEM_CLIENT")
    vm_wait "$pid" "$t" || rc=$?
    rm -rf "$VM_SOCKDIR"
    [ $rc -eq 0 ] || report "$scen/timeout" FAIL "guest still running after $t s"
    vm_collect "$scen" vm yes
}

# vm_wait PID TIMEOUT: wait for QEMU to exit; kill it and return 1 on timeout.
vm_wait() {
    local pid=$1 t=$2 waited=0
    while kill -0 "$pid" 2>/dev/null; do
        if [ $waited -ge "$t" ]; then
            kill "$pid" 2>/dev/null; sleep 1; kill -9 "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 1
        fi
        sleep 1; waited=$((waited + 1))
    done
    wait "$pid" 2>/dev/null
    return 0
}

# run_pair SCEN TIMEOUT "server rr.* words" "client rr.* words"
# The client boots only once the server says its listeners are up.
run_pair() {
    local scen=$1 t=$2 swords=$3 cwords=$4 spid cpid wpid rc=0 waited=0 listen connect
    VM_DIR=$VM_RUNDIR/$scen; rm -rf "$VM_DIR"; mkdir -p "$VM_DIR"
    VM_SOCKDIR=$(mktemp -d /tmp/rr-vm.XXXXXX)
    case $VM_LINK in
    tcp)
        local port; port=$(free_port)
        listen="socket,listen=127.0.0.1:$port" connect="socket,connect=127.0.0.1:$port" ;;
    unix)
        listen="stream,server=on,addr.type=unix,addr.path=$VM_SOCKDIR/link"
        connect="stream,server=off,addr.type=unix,addr.path=$VM_SOCKDIR/link" ;;
    *) rm -rf "$VM_SOCKDIR"; die "VM_LINK=$VM_LINK: tcp or unix" ;;
    esac
    spid=$(vm_start server 52:54:00:00:00:01 "$listen" \
        "rr.role=server rr.script=server $swords" "$VM_MEM_SERVER")
    until grep -q '^RR-READY' "$VM_DIR/server.results.log" 2>/dev/null; do
        if ! kill -0 "$spid" 2>/dev/null || [ $waited -ge 240 ]; then
            kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
            report "$scen/server-ready" FAIL "nfsd not up after $waited s; see $VM_DIR/server.console.log"
            vm_collect "$scen" server no
            rm -rf "$VM_SOCKDIR"
            return
        fi
        sleep 1; waited=$((waited + 1))
    done
    vm_fault_watch & wpid=$!
    cpid=$(vm_start client 52:54:00:00:00:02 "$connect" \
        "rr.role=client $cwords" "$VM_MEM_CLIENT")
    local t0=$SECONDS
    vm_wait "$cpid" "$t" || rc=$?
    [ $rc -eq 0 ] || report "$scen/timeout" FAIL "client still running after $t s"
    echo "  $scen: client ran $((SECONDS - t0)) s (host clock)"
    # A client that asked the server to tear down (server.sh teardown)
    # leaves before the server is done: wait for the server's verdict,
    # which would otherwise be cut short unreported.
    if grep -aqE '^RR-RESULT ([^ ]*/)?teardown_request PASS' "$VM_DIR/client.results.log" 2>/dev/null; then
        local tw=0
        until grep -aq '^RR-TEARDOWN-DONE' "$VM_DIR/server.results.log" 2>/dev/null; do
            if [ $tw -ge 180 ] || ! kill -0 "$spid" 2>/dev/null; then
                report "$scen/server-teardown-finished" FAIL "no teardown verdict from the server after $tw s; see $VM_DIR/server.console.log"
                break
            fi
            sleep 1; tw=$((tw + 1))
        done
    fi
    kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null || true
    kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
    rm -rf "$VM_SOCKDIR"
    if [ -s "$VM_DIR/host.log" ]; then
        sed 's/^/  host: /' "$VM_DIR/host.log"
        if grep -q error "$VM_DIR/host.log"; then
            report "$scen/host-faults" FAIL "$(grep -m 2 error "$VM_DIR/host.log" | tr '\n' ' ')"
        else
            report "$scen/host-faults" PASS
        fi
    fi
    vm_collect "$scen" server no
    vm_collect "$scen" client yes
    vm_collect_wire "$scen" client
    if [ $rc -ne 0 ] || grep -aq '^RR-RESULT .* FAIL' "$VM_DIR/client.results.log" 2>/dev/null; then
        vm_diag
    fi
}

# vm_diag: what the guests logged of the RDMA state when a check failed
# (tests/vm/srv-faults.sh stuck_log, server.sh link_state_log: IB CM
# counters, connection ids, blocked tasks), into the run's output, which
# is all a CI log keeps.
vm_diag() {
    local g
    for g in client server; do
        grep -aE '^(== client stuck|== server link state|cm_(tx|rx)_|link (rxe|siw)0/[-0-9]+ (cm-idn|lqpn|sent_pkts)|== D |== kworker|192\.0\.2\.|\[ *[0-9.]+\] (rxe0|siw|infiniband|ib_mad|ib_cm|rpcrdma))' \
            "$VM_DIR/$g.console.log" 2>/dev/null | tail -n 32 | cut -c1-300 | sed "s/^/  $g: /"
    done
}

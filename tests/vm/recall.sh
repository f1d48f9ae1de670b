# Delegation recall over the backchannel (RFC 8167): the client holds a
# file open with a delegation, the server writes to it; nfsd sends
# CB_RECALL on the client's own RDMA connection, the client answers and
# returns the delegation, and the server's write completes within a
# second. Then 200 delegations recalled at once, and for each fault of
# rr.faults (link: the server's link out 20 s; nfsd: nfsd restarted, so
# the client makes a new session and sets its backchannel up again), one
# more recall once the client is back.
# The server side is recall_req in server.sh.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
many=${RR_FILES:-200}
# rr.rounds=N adds a storm of N x $many callbacks (see storm).
rounds=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^rr\.rounds=//p')

. /scenario/deleg.sh

many_files() {
    mkdir /mnt/$1 || return 1
    i=1
    while [ $i -le "$many" ]; do
        echo "$i" > /mnt/$1/f$i || return 1
        i=$((i + 1))
    done
    reopen "$1"
    await_deleg "$1/" "$many" && recall "$1/" "$many" 60000
}

# storm ROUNDS: ROUNDS x $many delegations recalled, each round on new
# files, with the server's unreclaimable slab measured before and after
# (files removed, caches dropped): thousands of callbacks must not leak
# kernel memory. A page per callback would be 4 KiB x ROUNDS x $many.
storm() {
    ask mem || return 1
    slab0=$(field sunreclaim) free0=$(field freekb)
    r=1
    while [ $r -le "$1" ]; do
        many_files "storm-$r" > /tmp/storm.log 2>&1 || { cat /tmp/storm.log; return 1; }
        rm -rf "/mnt/storm-$r" /mnt/.recall
        r=$((r + 1))
    done
    ask mem || return 1
    slab1=$(field sunreclaim) free1=$(field freekb)
    calls=$(($1 * many))
    note "callback storm: $calls recalls; server SUnreclaim $slab0 -> $slab1 kB, MemFree $free0 -> $free1 kB"
    [ $((slab1 - slab0)) -lt $((calls * 4 / 2)) ] ||
        { echo "unreclaimable slab grew by $((slab1 - slab0)) kB over $calls callbacks"; return 1; }
}

# The backchannel's own counters (rpcrdma_rs: debugfs, see the admin guide).
bc_counters() {
    [ "${RR_MOD:-c}" = rs ] || return 0
    mount -t debugfs none /sys/kernel/debug 2>/dev/null
    for f in /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_bc_*; do
        [ -e "$f" ] && echo "== $f: $(cat "$f")"
    done
    received=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_bc_calls_received | awk '{ s += $1 } END { print s + 0 }')
    replied=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_bc_replies_sent | awk '{ s += $1 } END { print s + 0 }')
    note "backchannel: $received calls received, $replied replies sent"
    [ "$received" -gt 0 ] && [ "$replied" -gt 0 ]
}

# fault NAME: have the server inject fault NAME (server.sh), write, and
# keep asking the server through the mount until it says the fault is
# over (its answer in .fault-NAME.done): the client has I/O going
# through the fault by construction, not because a fixed wait let the
# fault land first. Then write again: the transport reconnected by itself.
fault() {
    # An existing file, read after each open (close-to-open), shows the
    # server's answer at once; a new name could hide behind a cached
    # negative lookup.
    : > "/mnt/.fault-$1.done" && echo go > "/mnt/.fault-$1" || return 1
    echo during > "/mnt/after-$1" && sync || return 1
    t0=$(uptime_s)
    # A read of a mount that does not come back blocks (hard mount):
    # killed, so that the bound holds.
    until timeout -s KILL 15 grep -q done "/mnt/.fault-$1.done"; do
        [ $(($(uptime_s) - t0)) -le 240 ] || { echo "server not done with fault $1 after 240 s"; return 1; }
        sleep 1
    done
    grep -q "done 0" "/mnt/.fault-$1.done" || { echo "server: $(cat "/mnt/.fault-$1.done")"; return 1; }
    rm "/mnt/.fault-$1.done" &&
        echo after > "/mnt/after-$1" && sync && [ "$(cat "/mnt/after-$1")" = after ]
}

# one_connection NAME: once the client is back, the server must hold its
# new connection only, within 10 s of the client's first write. The old
# one's end goes when the client's DREQ arrives (the CM resends it every
# ~5 s on RoCE): a client that stopped resending it when it gave the
# connection up leaves it on the server until a Send of the server's
# times out, which for the backchannel is the next CB_RECALL (the
# delegation then waits for the lease to run out: 10 s instead of 30 ms).
one_connection() {
    t0=$(uptime_s) waited=0
    until ask count "$1" > /dev/null && [ "$(field conns)" = 1 ]; do
        waited=$(($(uptime_s) - t0))
        [ $waited -lt 10 ] || { echo "server holds $(field conns) connections after $waited s"; return 1; }
        sleep 1
    done
    note "server holds one connection $(($(uptime_s) - t0)) s after the client's first write"
}

# rpcrdma_rs: the callbacks of recall_one and recall_many through the
# rpcrdma trace events (lib.sh). Every backward Call handed to the
# callback service (xprtrdma_cb_call) is answered once, under its XID
# (xprtrdma_cb_reply, fired as the Reply is marshalled), from the server
# the mount names; and every callback the NFS client's callback service
# ran (nfs4_cb_sequence: each NFSv4.1 callback starts with CB_SEQUENCE)
# came through it. Not one CB_RECALL per delegation: nfsd also recalls in
# bulk with CB_RECALL_ANY (deleg_reaper, whenever its state shrinker is
# asked to reclaim), and the client then returns the rest unasked.
cb_events() {
    trace_stop || return 1
    trace_fired xprtrdma_cb_call xprtrdma_cb_reply nfs4_cb_sequence || return 1
    c=$(trace_count xprtrdma_cb_call) r=$(trace_count xprtrdma_cb_reply) s=$(trace_count nfs4_cb_sequence)
    # Beside the CB_COMPOUNDs, a CB_NULL probe has no CB_SEQUENCE.
    [ "$c" -ge "$s" ] && [ "$s" -ge 2 ] ||
        { echo "$c backward Calls through the transport, $s callbacks run by the client"; return 1; }
    grep -h -v -m1 "peer=\[$SERVER4\]:$NFS_RDMA_PORT xid=0x[0-9a-f]\{8\}$" \
        "$TRACE_DIR/xprtrdma_cb_call" "$TRACE_DIR/xprtrdma_cb_reply" > /tmp/cb.other &&
        { echo "$(cat /tmp/cb.other)"; return 1; }
    # In recording order: a Reply answers a Call not yet answered.
    grep -h -E " xprtrdma_cb_(call|reply): " $TRACE_OUT |
        awk '{ ev = ""; x = ""
               for (i = 1; i <= NF; i++) {
                   if (ev == "" && $i ~ /^xprtrdma_cb_(call|reply):$/) ev = $i
                   else if ($i ~ /^xid=/) x = substr($i, 5) } }
             ev == "xprtrdma_cb_call:" { open[x]++; if (seen[x]++) dup++; else nx++ }
             ev == "xprtrdma_cb_reply:" {
                 if (open[x] < 1) { print "cb_reply xid=" x " answers no cb_call"; bad = 1; exit 1 }
                 open[x]-- }
             END { if (bad) exit 1
                   for (k in open) if (open[k]) { print "cb_call xid=" k " never answered"; exit 1 }
                   printf "%d distinct XIDs, %d seen again\n", nx, dup }' > /tmp/cb.check ||
        { cat /tmp/cb.check; return 1; }
    trace_sample xprtrdma_cb_call xprtrdma_cb_reply
    note "backchannel trace: $c backward Calls, $r Replies, $s callbacks run, $((many + 1)) delegations recalled; $(cat /tmp/cb.check)"
}

check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
if check mount nfs_mount; then
    check transport_in_use transport_in_use
    # shellcheck disable=SC2034 # read by lib.sh trace_start, trace_stop
    TRACE_ALSO=nfs4/nfs4_cb_sequence
    [ "${RR_MOD:-c}" != rs ] || check cb_trace_start trace_start
    check recall_one one recall-one
    check recall_many many_files recall-many
    [ "${RR_MOD:-c}" != rs ] || check cb_trace_events cb_events
    for f in ${RR_FAULTS:-}; do
        check fault_$f fault $f && check old_connection_gone_after_$f one_connection after-$f &&
            check recall_after_$f one recall-after-$f
    done
    [ "${rounds:-0}" -gt 0 ] && check "callback_storm_${rounds}x$many" storm "$rounds"
    check backchannel_counters bc_counters
    grep -A 3 "xprt:" /proc/self/mountstats
    grep -E "^ *(DELEGRETURN|OPEN):" /proc/self/mountstats
    check cleanup rm -rf /mnt/recall-* /mnt/after-* /mnt/.recall
    check umount umount /mnt
fi
case ${RR_MOD:-c} in
c)  check unload_transport unload rpcrdma ;;
rs) check unload_transport unload rpcrdma_rs ;;
esac

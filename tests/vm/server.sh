# NFS server VM: nfsd with tcp 2049 and rdma 20049 listeners over a tmpfs
# export, then idle until the host ends the run.
# shellcheck shell=sh

# 64 KiB of known bytes, 4096 lines "%015d\n" from 0, which the hostile
# client (svc-hostile.sh, rpcrdma-peer -c write-many-segs and
# reply-many-segs) READs as /.peerdata and compares. A dot file, which the
# scenarios that list the export do not see.
peerdata() { awk 'BEGIN { for (i = 0; i < 4096; i++) printf "%015d\n", i }'; }

export_fs() {
    mount -t tmpfs -o size=${RR_SIZE:-700}m tmpfs /export && chmod 1777 /export &&
        peerdata > /export/.peerdata &&
        mount -t nfsd nfsd /proc/fs/nfsd &&
        mount -t rpc_pipefs rpc_pipefs /var/lib/nfs/rpc_pipefs || return 1
    opts=rw,no_root_squash,insecure,no_subtree_check,fsid=0
    # rr.links=2: clients on the second link too (svc-hostile.sh twodev_io).
    second=
    [ "${RR_LINKS:-1}" != 2 ] || second=" 192.0.3.0/24($opts)"
    printf '/export 192.0.2.0/24(%s) 2001:db8::/64(%s)%s\n' "$opts" "$opts" "$second" > /etc/exports
    exportfs -ra
}

# Versions, lease, grace and the largest READ/WRITE must be set before
# listeners and threads exist.
nfsd_tune() {
    echo "+3 +4 +4.1 +4.2" > /proc/fs/nfsd/versions &&
        echo 10 > /proc/fs/nfsd/nfsv4leasetime &&
        echo 10 > /proc/fs/nfsd/nfsv4gracetime &&
        # lockd's grace (50 s by default, nlm_timeout x 5) is a grace of
        # its own that nfsd honours too: no delegation is granted until
        # it ends, and it starts again with each nfsd restart.
        echo 10 > /proc/sys/fs/nfs/nlm_grace_period &&
        # nfsd sizes its largest READ and WRITE from the VM's memory
        # (256 KiB here); ask for the 1 MiB both RDMA transports offer,
        # or for rr.maxblksize.
        echo "${RR_MAXBLKSIZE:-1048576}" > /proc/fs/nfsd/max_block_size
}

rpc_daemons() {
    mkdir -p /run/rpcbind && rpcbind && rpc.mountd --port $MOUNTD_PORT
}

nfsd_listen() {
    echo "tcp 2049" > /proc/fs/nfsd/portlist || return 1
    if [ "${RR_MOD:-c}" != none ]; then
        echo "rdma 20049" > /proc/fs/nfsd/portlist || return 1
    fi
    echo 8 > /proc/fs/nfsd/threads || return 1
    note "nfsd listening: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
}

nfsd_restart() {
    echo 0 > /proc/fs/nfsd/threads && sleep 5 &&
        nfsd_listen && note "nfsd restarted"
}

# link_loss SECS: ask the host to pull our cable for SECS s (QEMU set_link,
# scripts/vm.sh) and follow it on eth0's carrier. Downing eth0 from in here
# churned rxe's port, GIDs and routes, which is not what a cable pull does,
# and on a loaded host left clients unable to connect again.
# A second argument (the soak's many outages) skips link_state_log, whose
# two minutes of logging would overlap the next outage's.
link_loss() {
    echo "RR-FAULT link $1" > "$RESULTS"
    wait_carrier 0 60 && note "link down" &&
        wait_carrier 1 $(($1 + 60)) && note "link back up" || return 1
    [ -n "${2:-}" ] || console_bg link_state_log
}

# gsi_state: the state of our GSI QP (QP 1), which carries the IB CM's
# messages: RTS, or the node is deaf to connection requests (issue 30).
gsi_state() { rdma resource show qp lqpn 1 2>&1 | sed -n 's/.* state \([A-Z_]*\).*/\1/p'; }

# gsi_watch: the soak (rr.soak) publishes the GSI QP's state every 5 s,
# readable over HTTP when the client's mount is stuck.
gsi_watch() {
    while :; do
        publish gsi "$(gsi_state) $(uptime_s)"
        sleep 5
    done
}

# cm_send_lost: nfsd restarts while the link takes no packet over 200
# bytes, so that the CM's DREQs cannot leave. rxe used to move its GSI QP
# (QP 1) to the error state on such a send, which flushed the MAD layer's
# receives for good: no connection request was heard again, and clients
# never came back (scripts/kernel-patches/0001-*). The GSI QP must still
# be in RTS, and rxe must have counted a failed send, or the fault was not
# injected; the client checks that it connects again.
cm_send_lost() {
    mtu=$(cat /sys/class/net/eth0/mtu) before=$(rxe_send_errors)
    $IP link set eth0 mtu 200 || return 1
    echo 0 > /proc/fs/nfsd/threads
    # 5 s at least, and until rxe counted a refused send (a slow machine
    # sends its DREQs later): the fault is injected by construction.
    i=0
    while [ $i -lt 5 ] || [ "$(rxe_send_errors)" -le "$before" ]; do
        i=$((i + 1))
        [ $i -le 60 ] || break
        sleep 1
    done
    after=$(rxe_send_errors) gsi=$(rdma resource show qp lqpn 1)
    $IP link set eth0 mtu "$mtu" || return 1
    # The refused sends taught the route to the client a path MTU of 200
    # bytes, which outlives the interface's: every later CM message would
    # be refused again.
    $IP route flush cache
    # Below 1280 bytes IPv6 left the interface, and its address with it.
    $IP -6 addr add "$SERVER6/64" dev eth0 nodad 2>/dev/null
    nfsd_listen || return 1
    note "CM messages lost: rxe send errors $before -> $after; $gsi"
    [ "$after" -gt "$before" ] || { echo "no send failed: the fault was not injected"; return 1; }
    case $gsi in
    *"state RTS"*) ;;
    *) echo "GSI QP not in RTS: $gsi"; return 1 ;;
    esac
}

# ud_send_lost: a UD send whose source GID went after its address
# handle was made (tests/peer/ud-lost.c), the path of the CM's messages on
# QP 1 when the node's address goes under a connection. rxe moved the QP
# to the error state for good (scripts/kernel-patches/0003-*). The
# datagram must be lost instead (completed as sent, counted in send_err)
# and the QP must go on sending and receiving. Run with no connection
# left (after teardown): RC QPs on that GID would break too. The address
# comes back after.
ud_send_lost() {
    peer=192.0.2.2 d=/tmp/ud-lost
    dev=$($IP -4 -o addr show to "$SERVER4/32" | awk '{ print $2; exit }')
    [ -n "$dev" ] || { echo "$SERVER4 is on no interface"; return 1; }
    rm -rf $d && mkdir $d || return 1
    (exec > $d/out 2>&1 < /dev/null; ud-lost "$RDMA_DEV" "$SERVER4" $peer "$SERVER6" $d) &
    pid=$!
    i=0
    until [ -s $d/ready ]; do
        i=$((i + 1))
        if [ $i -gt 300 ] || ! kill -0 $pid 2> /dev/null; then
            kill $pid 2> /dev/null; wait $pid
            echo "ud-lost not ready in 30 s: $(cat $d/out)"; return 1
        fi
        sleep 0.1
    done
    idx=$(cat $d/ready) want=$(gid4 $SERVER4)
    gid=/sys/class/infiniband/$RDMA_DEV/ports/1/gids/$idx
    before=$(rxe_send_errors)
    $IP addr del "$SERVER4/24" dev "$dev" || { kill $pid; wait $pid; return 1; }
    # The GID goes in a work item (roce_gid_mgmt.c): the send must come
    # after. sysfs reads an entry that is no longer valid as zeros, the
    # test rxe_init_packet() fails on. Nothing adds an address meanwhile,
    # and the AH's reference keeps the entry's index from any other GID.
    i=0
    while [ "$(cat "$gid")" = "$want" ]; do
        i=$((i + 1))
        [ $i -le 300 ] || break
        sleep 0.1
    done
    at_send=$(cat "$gid")
    touch $d/go
    wait $pid
    rc=$?
    after=$(rxe_send_errors)
    $IP addr add "$SERVER4/24" dev "$dev" || return 1
    note "UD send from a gone GID (index $idx read $at_send at the send): send $(udlost send_status), QP $(udlost qp_state), probe send $(udlost probe_send), probe receive $(udlost probe_recv); rxe send errors $before -> $after"
    [ $rc -eq 0 ] || { echo "ud-lost: $(cat $d/out)"; return 1; }
    if [ "$(udlost send_status)" = success ] && [ "$(udlost qp_state)" = RTS ] && [ "$after" -le "$before" ]; then
        echo "not injected: the send completed, the QP in RTS, send_err unchanged"; return 1
    fi
    [ "$(udlost qp_state)" = RTS ] || { echo "UD QP in $(udlost qp_state) after the send (completion: $(udlost send_status))"; return 1; }
    [ "$(udlost send_status)" = success ] || { echo "send completed: $(udlost send_status), not as a lost datagram"; return 1; }
    [ "$after" -gt "$before" ] || { echo "send_err unchanged ($before): the lost datagram was not counted"; return 1; }
    [ "$(udlost probe_send)" = success ] && [ "$(udlost probe_recv)" = success ] ||
        { echo "the QP no longer sends and receives: probe send $(udlost probe_send), receive $(udlost probe_recv)"; return 1; }
}

# udlost KEY: KEY's value in ud-lost's output.
udlost() { sed -n "s/^$1=//p" /tmp/ud-lost/out; }

# gid4 A.B.C.D: the RoCE GID of an IPv4 address as sysfs prints it.
gid4() {
    echo "$1" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n", $1, $2, $3, $4 }'
}

rxe_send_errors() {
    rdma statistic show link rxe0/1 | sed -n 's/.* send_err \([0-9]*\).*/\1/p'
}

# wait_carrier 0|1 SECS: until eth0's carrier reads 0 or 1, for SECS at most.
wait_carrier() {
    i=0
    until [ "$(cat /sys/class/net/eth0/carrier)" = "$1" ]; do
        i=$((i + 1))
        [ $i -le "$2" ] || { echo "eth0 carrier not $1 after $2 s"; return 1; }
        sleep 1
    done
}

# What the server's side of the link looks like once it is back, for
# diagnosing clients that fail to reconnect: neighbours, RDMA resources,
# the device's packet counters and nfsd's pool counters every 15 s for two minutes,
# and after 30 s where each nfsd thread is (a connection request nfsd never
# accepts goes unanswered: the client's CM resends its REQ, and rpcrdma.ko's
# connect waits on).
link_state_log() {
    for i in 1 2 3 4 5 6 7 8; do
        sleep 15
        echo "== server link state at $(cut -d' ' -f1 /proc/uptime)"
        $IP neigh show dev eth0
        $IP -s link show eth0
        rdma resource show
        rdma resource show cm_id
        rdma resource show qp
        rdma statistic show link "$RDMA_DEV/1"
        cm_counters
        cat /proc/fs/nfsd/pool_stats 2>/dev/null
        blocked_log
        [ "$i" = 2 ] || continue
        for d in /proc/[0-9]*; do
            [ "$(cat "$d/comm" 2>/dev/null)" = nfsd ] || continue
            echo "== nfsd ${d#/proc/}: $(tr '\n' ' ' < "$d/stack" 2>/dev/null)"
        done
    done
}

# populate_dir REQUEST: the client asks for a big directory by writing "NAME COUNT"
# to /export/.populate; we make COUNT empty files in /export/NAME and append
# "done". Creating them over NFS costs two round trips each (minutes under
# TCG); the client only needs them to exist to list them. REQUEST is the
# file's contents, read once by fault_watch.
populate_dir() {
    name=${1%% *} count=${1#* }
    mkdir "/export/$name" && cd "/export/$name" &&
        seq 1 "$count" | sed 's/^/entry-with-a-longish-name-/' | xargs touch &&
        cd / && echo "done" >> /export/.populate
}

# Milliseconds since boot, to the 10 ms of /proc/uptime (busybox date has
# no %N).
now_ms() {
    read -r up _ < /proc/uptime
    cs=${up#*.}
    echo $((${up%.*} * 1000 + ${cs#0} * 10))
}

# Delegations held on files whose name contains $1 (the filename field is
# the file's last two path components).
delegations() {
    cat /proc/fs/nfsd/clients/*/states 2>/dev/null | grep 'type: deleg' | grep -c "$1"
}

# DELEGRETURNs nfsd has executed: field 8 of the proc4ops line.
delegreturns() { awk '$1 == "proc4ops" { print $11 }' /proc/net/rpc/nfsd; }

# recall_req REQUEST: the recall scenario (recall.sh) asks for "count NAME"
# (how many delegations on NAME) or "write NAME COUNT": append to NAME, or
# to NAME/f1..COUNT all at once, which breaks the client's delegations and
# makes nfsd send CB_RECALLs; we time it. Each answer also gives the
# number of connected RDMA ids (conns). The answer is appended to
# /export/.recall as one "done" line.
recall_req() {
    set -- $1
    before=$(delegations "$2") returns=$(delegreturns)
    case $1 in
    count) ms=0 ;;
    mem)
        # Unreclaimable slab and free pages once the caches are dropped
        # and the slabs shrunk, for the callback leak check (recall.sh
        # storm): unshrunk, KASAN's quarantine read as 2.7 kB kept per
        # callback.
        sync && echo 3 > /proc/sys/vm/drop_caches && sleep 1
        shrink_slabs
        echo "done ms=0 sunreclaim=$(awk '$1 == "SUnreclaim:" { print $2 }' /proc/meminfo) freekb=$(awk '$1 == "MemFree:" { print $2 }' /proc/meminfo)" >> /export/.recall
        return 0 ;;
    write)
        t0=$(now_ms)
        if [ "$3" = 1 ]; then
            echo x >> "/export/$2" || return 1
        else
            i=1
            while [ $i -le "$3" ]; do
                echo x >> "/export/$2/f$i" &
                i=$((i + 1))
            done
            wait
        fi
        ms=$(($(now_ms) - t0)) ;;
    *) echo "unknown recall request '$*'"; return 1 ;;
    esac
    cb=$(grep -h 'callback state' /proc/fs/nfsd/clients/*/info | sed 's/.*: //' | sort -u | tr '\n' ' ')
    # Connected RC ids: the client's connections as the server sees them.
    conns=$(rdma resource show cm_id 2>/dev/null | grep -c 'qp-type RC state CONNECT')
    echo "done ms=$ms delegs=$before left=$(delegations "$2") delegreturn=$(($(delegreturns) - returns)) conns=$conns cb=$cb" >> /export/.recall
}

# profile_watch: start and stop a profile of the whole server when the
# bench's client asks for it in /export/.profile, and answer there (see
# server_profile in bench.sh); the report goes to the host directly.
# RR_PROFILER=perf (the default) takes cpu-clock samples; funcs counts
# every kernel function's calls with ftrace's function profiler: exact
# counts, to divide by the RPCs served, at the cost of a much slower
# guest.
profile_watch() {
    case $(cat /export/.profile 2>/dev/null) in
    start)
        if [ "${RR_PROFILER:-perf}" = funcs ]; then
            trace=/sys/kernel/tracing
            [ -e $trace/function_profile_enabled ] || mount -t tracefs tracefs $trace
            echo 1 > $trace/function_profile_enabled
            sched_counts | cut -d' ' -f4 > /tmp/server.rpcs
        else
            perf record -q -a -e cpu-clock -F 199 -o /tmp/server.perf > /tmp/server.perf.log 2>&1 &
            echo $! > /tmp/server.perf.pid
        fi
        sleep 1; echo started > /export/.profile ;;
    stop)
        if [ "${RR_PROFILER:-perf}" = funcs ]; then
            echo 0 > /sys/kernel/tracing/function_profile_enabled
            funcs_report server "$(($(sched_counts | cut -d' ' -f4) - $(cat /tmp/server.rpcs)))"
        else
            kill -INT "$(cat /tmp/server.perf.pid)"
            while kill -0 "$(cat /tmp/server.perf.pid)" 2>/dev/null; do sleep 1; done
            perf_report server /tmp/server.perf
        fi
        echo done > /export/.profile ;;
    esac
}

# cpu_watch: the bench's server CPU samples (rr.srvcpu=on). The client
# writes "start NAME" or "stop NAME" into /export/.cpu around each fio job
# (server_cpu in bench.sh); we take our CPU ticks at once, answer "started
# NAME" or "stopped NAME" there, and at "stop" send the difference to the
# host: RR-SCPU NAME user sys softirq idle other (ticks, as the client's
# RR-CPU), and RR-SSCHED NAME ctxt intr softirq rpcs (sched_counts).
# Polled every 0.1 s, so the server's window exceeds the client's by a
# fraction of a second. The poll forks nothing: busybox's sleep is a
# fork and exec (10 a second would be a visible share of the busy time we
# measure), so it waits with the shell's read on a FIFO nobody writes.
cpu_watch() {
    mkfifo /tmp/cpu_watch.tick && exec 3<> /tmp/cpu_watch.tick || return 1
    while :; do
        req=
        [ ! -e /export/.cpu ] || read -r req < /export/.cpu 2>/dev/null || true
        case $req in
        "start "*)
            t0=$(cpu_ticks) s0=$(sched_counts)
            echo "started ${req#start }" > /export/.cpu ;;
        "stop "*)
            t1=$(cpu_ticks) s1=$(sched_counts)
            echo "$t0 $t1" | awk -v n="${req#stop }" \
                '{ print "RR-SCPU", n, $6 - $1, $7 - $2, $8 - $3, $9 - $4, $10 - $5 }' > "$RESULTS"
            echo "$s0 $s1" | awk -v n="${req#stop }" \
                '{ print "RR-SSCHED", n, $5 - $1, $6 - $2, $7 - $3, $8 - $4 }' > "$RESULTS"
            echo "stopped ${req#stop }" > /export/.cpu ;;
        esac
        read -r -t 0.1 -u 3 tick || true
    done
}

# What `rdma resource show` counts (pd, cq, qp, cm_id, mr ...), without
# the device's index, which a device deleted and added back changes; and
# the QPs it lists.
qp_count() { rdma resource show qp | wc -l; }

# counts_req REQUEST: svc-hostile.sh's leak check around its abandoned
# connects, through /export/.counts. "baseline": once the client's mount
# holds our only connection (one QP more than before nfsd; 120 s at
# most: settled=0 otherwise), take a snapshot. "compare N" (N connects
# abandoned): until the RDMA counts equal the baseline's, no kmalloc
# cache holds N/2 objects more than then (a leak of one object a
# connect shows as N; after 1000, neither server's caches held more than
# 45 more), and MemFree is down by less than N x 32 KiB (one connection's buffers are over a MiB);
# 180 s at most for connections to settle, ok=0 after that. The answer
# is appended as one "done" line.
counts_req() {
    set -- $1
    case $1 in
    baseline)
        i=0
        until [ "$(qp_count)" -eq $((BASE_QPS + 1)) ]; do
            i=$((i + 1))
            [ $i -le 120 ] || break
            sleep 1
        done
        settled=0
        [ "$(qp_count)" -ne $((BASE_QPS + 1)) ] || settled=1
        counts_snapshot > /tmp/counts.base
        echo "done settled=$settled qps=$(qp_count) base_qps=$BASE_QPS $(sed -n 's/^rdma /rdma=/p' /tmp/counts.base) memfree=$(awk '$1 == "memfree" { print $2 }' /tmp/counts.base)" >> /export/.counts ;;
    compare)
        t0=$(uptime_s)
        while :; do
            counts_snapshot > /tmp/counts.now
            # shellcheck disable=SC2046 # slab_most=... memfree_down_kb=...
            verdict=$(awk -v n="$2" $(mem_growth /tmp/counts.base /tmp/counts.now | sed 's/^/-v /; s/ / -v /2') '
                FNR == NR { if ($1 == "rdma") br = $2; next }
                $1 == "rdma" { nr = $2 }
                END {
                    # The growth of the cache that grew most (the first of slab_most).
                    w = slab_most; sub(/,.*/, "", w); sub(/^.*:/, "", w)
                    held = nr == br && memfree_down_kb < n * 32
                    ok = held && w + 0 < n / 2
                    printf "ok=%d held_back=%d slab_most=%s memfree_down_kb=%d rdma=%s rdma_before=%s\n", ok, held, slab_most, memfree_down_kb, nr, br }' \
                /tmp/counts.base /tmp/counts.now)
            case $verdict in ok=1*) break ;; esac
            # The RDMA resources and the memory are back: the slab
            # figure is waited for a minute at most (svc-hostile.sh
            # abandon_no_leak fails on ok=0).
            case $verdict in *held_back=1*) [ $(($(uptime_s) - t0)) -lt 60 ] || break ;; esac
            [ $(($(uptime_s) - t0)) -le 180 ] || break
            sleep 5
        done
        echo "done after_s=$(($(uptime_s) - t0)) $verdict" >> /export/.counts ;;
    *) echo "unknown counts request '$*'"; return 1 ;;
    esac
}

# listens_on DEV: one of nfsd's RDMA listeners is on DEV: the wildcard
# listener's per-device child there (rdma_cm's cma_listen_on_dev).
listens_on() {
    rdma resource show cm_id | grep -qE "^(link $1/[-0-9]+|dev $1) .*state LISTEN .*:$NFS_RDMA_PORT( |\$)"
}

# twodev_req REQUEST: svc-hostile.sh's twodev_phase (rr.links=2), through
# /export/.twodev. "listeners": nfsd's wildcard RDMA listener listens on
# both devices. "delete": the second device deleted, which must return
# within 60 s (ib_unregister_device waits for every CM id on it: a
# connection request the accept path forgot, neither queued nor
# rejected, held it for good), then added back, and the listener must
# listen on the new one by itself. "counts": the transport's counts of
# connections accepted, refused and failed. The answer is appended as one "done
# rc=N ..." line.
twodev_req() {
    rc=0
    case $1 in
    listeners)
        out=
        for d in $RDMA_DEV $RDMA_DEV2; do
            listens_on $d || { rc=1; out="$out no_listener_on=$d"; }
        done
        [ $rc -eq 0 ] || rdma resource show cm_id ;;
    delete)
        # In the background, off check's output pipe: a delete stuck in
        # the kernel cannot be killed, and this loop must answer all the
        # same.
        t0=$(now_ms)
        rdma link delete $RDMA_DEV2 > /tmp/twodev.del 2>&1 < /dev/null & pid=$!
        if await_exit $pid 60; then
            wait $pid || { rc=1; cat /tmp/twodev.del; }
            out="deleted_ms=$(($(now_ms) - t0)) status=$rc"
        else
            # Nothing more from rdma here: it would wait on the device too.
            rc=1 out="delete_stuck_after_ms=$(($(now_ms) - t0))"
            echo "rdma link delete $RDMA_DEV2 still running after 60 s"
        fi
        if [ $rc -eq 0 ]; then
            rdma link add $RDMA_DEV2 type $RDMA_TYPE netdev eth1 || rc=1
            i=0
            until [ $rc -ne 0 ] || listens_on $RDMA_DEV2; do
                i=$((i + 1))
                [ $i -le 20 ] || { rc=1; out="$out no_listener_on_new=$RDMA_DEV2"; rdma resource show cm_id; }
                sleep 1
            done
            [ $rc -ne 0 ] || out="$out relisten_s=$i"
        fi ;;
    counts)
        # The transport's own count of the connections it accepted,
        # refused, and failed to accept (rpcrdma_rs's debugfs).
        d=/sys/kernel/debug/rpcrdma_rs_server
        out="accepted=$(cat $d/connections_accepted) refused=$(cat $d/connections_refused) failed=$(cat $d/accepts_failed)" || rc=1 ;;
    *) rc=1 out="unknown request '$1'" ;;
    esac
    echo "done rc=$rc $out" >> /export/.twodev
    return $rc
}

# svc_stats: the four counters of sunrpc.svc_rdma, as NAME=VALUE.
svc_stats() {
    for c in read recv write sq_starve; do
        printf '%s=%s ' $c "$(sysctl -n sunrpc.svc_rdma.rdma_stat_$c)"
    done
    # rpcrdma_rs's RPC-over-RDMA version 2 Calls and Replies (issue 29).
    for c in calls_v2 replies_v2; do
        f=/sys/kernel/debug/rpcrdma_rs_server/$c
        [ ! -f $f ] || printf '%s=%s ' $c "$(cat $f)"
    done
}

# sysctl_req REQUEST: matrix.sh's server checks of the sysctls (issue 28),
# through /export/.sysctl. "tables": sysctl_tables here; "set KEY VALUE":
# sysctl -w sunrpc.svc_rdma.KEY=VALUE; "stats": the counters; "reset": a
# write to each counter (any write resets it, as with rpcrdma.ko), and
# the counters before and after. The answer is appended as one "done"
# line, with rc= the request's status.
sysctl_req() {
    set -- $1
    mod=rpcrdma_rs
    [ "${RR_MOD:-c}" = rs ] || mod=rpcrdma
    case $1 in
    tables) out=$(sysctl_tables $mod 2>&1); rc=$? ;;
    set)    out=$(sysctl_set "sunrpc.svc_rdma.$2" "$3" 2>&1); rc=$? ;;
    stats)  out=$(svc_stats); rc=$? ;;
    reset)
        before=$(svc_stats | sed 's/\([a-z_]*=\)/before_\1/g') rc=0
        for c in read recv write sq_starve; do
            sysctl -w sunrpc.svc_rdma.rdma_stat_$c=7 > /dev/null || rc=1
        done
        out="$(svc_stats) $before" ;;
    *) out="unknown request"; rc=1 ;;
    esac
    echo "done rc=$rc $out" | tr '\n' ' ' >> /export/.sysctl
    echo >> /export/.sysctl
    return $rc
}

# dev_del SECS: delete our rxe device under the clients' connections and
# add it back SECS s later. The delete must return (ib_unregister_device
# waits until the transport released every connection's QP and CM id);
# the wildcard listener gets no DEVICE_REMOVAL and must listen on the new
# device by itself (rdma_cm's per-device child of it), and take the
# client's connection again. Each step's time goes to the results.
dev_del() {
    t0=$(now_ms)
    timeout 60 rdma link delete rxe0 || { echo "rdma link delete rxe0: status $?"; return 1; }
    note "rxe0 deleted in $(($(now_ms) - t0)) ms; back in $1 s"
    sleep "$1"
    rdma link add rxe0 type rxe netdev eth0 || return 1
    t0=$(now_ms) i=0
    until rdma resource show cm_id | grep -q "state LISTEN .*:$NFS_RDMA_PORT"; do
        i=$((i + 1))
        [ $i -le 20 ] || { echo "no listener on the new rxe0: $(rdma resource show cm_id)"; return 1; }
        sleep 1
    done
    until [ "$(qp_count)" -gt "$BASE_QPS" ]; do
        i=$((i + 1))
        [ $i -le 180 ] || { echo "no connection on the new rxe0 after $i s"; return 1; }
        sleep 1
    done
    note "rxe0 back: listening, client connected again after $(($(now_ms) - t0)) ms"
}

# bond_failover: nfsd's RDMA listener must keep listening through a bond
# failover (issue 27). rdma_cm tells an id of one (ADDR_CHANGE) only if
# the id is bound to the bond and its source MAC is no longer the bond's
# (cma.c cma_netdev_change): so rxe moves from eth0 to an active-backup
# bond of eth0 and eth1 (which leads nowhere, scripts/vm.sh) that takes
# its active slave's MAC, and nfsd's RDMA listener is bound to our
# address through netlink (the portlist only makes wildcard ones, which
# are bound to no device). The bond fails over to eth1 and back; the
# client, which left first, then mounts through that listener.
bond_failover() {
    base_qps_back || return 1
    # Listeners go with the threads; nfsd would refuse to close one under
    # them.
    echo 0 > /proc/fs/nfsd/threads || return 1
    timeout 60 rdma link delete rxe0 || { echo "rdma link delete rxe0: status $?"; return 1; }
    # CONFIG_BONDING=y made bond0 at boot. eth0's MTU for the slaves
    # (which take the bond's), as rxe had it before.
    mtu=$(cat /sys/class/net/eth0/mtu)
    { [ -e /sys/class/net/bond0 ] || $IP link add bond0 type bond; } &&
        $IP link set bond0 type bond mode active-backup miimon 100 fail_over_mac active &&
        $IP link set bond0 mtu "$mtu" &&
        $IP addr flush dev eth0 &&
        $IP link set eth0 down &&
        $IP link set eth0 master bond0 &&
        $IP link set eth1 master bond0 &&
        $IP link set bond0 up &&
        $IP addr add "$SERVER4/24" dev bond0 &&
        $IP -6 addr add "$SERVER6/64" dev bond0 nodad &&
        rdma link add rxe0 type rxe netdev bond0 || return 1
    bond_to eth0 || return 1
    nfsd-listener rdma "$SERVER4" "$NFS_RDMA_PORT" &&
        echo "tcp $NFS_PORT" > /proc/fs/nfsd/portlist &&
        echo 8 > /proc/fs/nfsd/threads || return 1
    note "nfsd listening: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
    rdma resource show cm_id | grep -E "state LISTEN .*$SERVER4:$NFS_RDMA_PORT( |\$)" ||
        { echo "no listener bound to $SERVER4: $(rdma resource show cm_id)"; return 1; }
    n=$(addr_changes)
    bond_to eth1 && bond_to eth0 || return 1
    [ "$(addr_changes)" -gt "$n" ] || { echo "rdma_cm saw no address change"; return 1; }
    note "bond0 failed over to eth1 and back: $(($(addr_changes) - n)) rdma_cm address changes"
}

# The CM ids rdma_cm told of a bond0 failover so far.
addr_changes() { dmesg | grep -c "RDMA CM addr change for ndev bond0"; }

# bond_to SLAVE: make SLAVE bond0's active slave and wait (30 s at most)
# until the bond has its MAC. The bond refuses a slave whose link its
# monitor has not seen up yet: asked again each second.
bond_to() {
    i=0
    until [ "$(cat /sys/class/net/bond0/bonding/active_slave)" = "$1" ] &&
        [ "$(cat /sys/class/net/bond0/address)" = "$(cat "/sys/class/net/$1/address")" ]; do
        i=$((i + 1))
        [ $i -le 30 ] || { echo "bond0 not on $1: $(cat /proc/net/bonding/bond0)"; return 1; }
        echo "$1" > /sys/class/net/bond0/bonding/active_slave 2> /dev/null
        sleep 1
    done
}

# thread_churn COUNT...: set nfsd's thread count to each COUNT in turn,
# 4 s apart, while the client does I/O; each must read back.
thread_churn() {
    for n in "$@"; do
        echo "$n" > /proc/fs/nfsd/threads || return 1
        got=$(cat /proc/fs/nfsd/threads)
        [ "$got" = "$n" ] || { echo "threads reads $got, not $n"; return 1; }
        sleep 4
    done
    note "nfsd threads went $*"
}

# base_qps_back: wait (60 s at most) until no QP is left but those from
# before nfsd (the clients' connections are gone).
base_qps_back() {
    i=0
    until [ "$(qp_count)" -eq "$BASE_QPS" ]; do
        i=$((i + 1))
        [ $i -le 60 ] || { echo "QPs still open: $(rdma resource show qp)"; return 1; }
        sleep 1
    done
}

# teardown: once the client asked (.teardown) and left, the server's
# transport (rpcrdma_rs, or rpcrdma.ko as the reference) must refuse to
# unload while nfsd listens on it, unload once nfsd is stopped, and leave
# no RDMA resource behind (counts as before nfsd started). With
# rpcrdma_rs, the backchannel rpc_xprts of the clients' NFSv4.1+
# connections must be gone once nfsd stopped, and none of its rpc_xprts
# may be left after rmmod (issue 27, defect 5: one leaked per connection).
teardown() {
    mod=rpcrdma_rs
    [ "${RR_MOD:-c}" = rs ] || mod=rpcrdma
    base_qps_back || return 1
    # nfsd's pool counters over the run: Calls handed to nfsd
    # (packets-arrived) and transport wake-ups (sockets-enqueued); under
    # rr.wakeups=MAX, at most MAX wake-ups per Call.
    pool=$(awk '!/^#/ { c += $2; q += $3 } END { printf "%d %d %.2f", c, q, c ? q / c : 0 }' /proc/fs/nfsd/pool_stats)
    # shellcheck disable=SC2086 # three words
    set -- $pool
    note "nfsd: $1 Calls, $2 transport enqueues ($3 per Call)"
    if [ -n "${RR_WAKEUPS:-}" ] && ! awk -v r="$3" -v m="$RR_WAKEUPS" -v c="$1" 'BEGIN { exit !(c > 0 && r <= m) }'; then
        echo "nfsd woken $3 times per Call (at most $RR_WAKEUPS)"; return 1
    fi
    if rmmod $mod 2>/dev/null; then echo "rmmod $mod succeeded while nfsd listens"; return 1; fi
    note "backchannel rpc_xprts once the clients left, nfsd still up: $(bc_xprts)"
    echo 0 > /proc/fs/nfsd/threads || return 1
    # Each NFSv4.1+ connection had a backchannel rpc_xprt; stopping nfsd
    # destroys every client and its callback client (the xprts go from a
    # work item, so within a bounded wait). rpcrdma.ko leaks one per
    # connection (issue 27, defect 5): only noted for it.
    if [ "$mod" = rpcrdma_rs ]; then
        check server_backchannel_xprts_freed bc_xprts_freed || return 1
    else
        note "rpcrdma.ko's server: $(bc_xprts) backchannel rpc_xprts left after nfsd stopped"
    fi
    unload $mod || return 1
    [ "$mod" != rpcrdma_rs ] || check server_no_rpc_xprt_after_unload no_xprt_after_unload || return 1
    now=$(rdma_counts)
    [ "$now" = "$BASELINE" ] || { echo "RDMA resources before: $BASELINE; after: $now" | tr '\n' ' '; return 1; }
    # The soak's memory figure (scripts/soak.sh), the transport gone.
    [ ! -f /tmp/mem.base ] || { counts_snapshot > /tmp/mem.end &&
        echo "RR-SOAK-MEM $(mem_growth /tmp/mem.base /tmp/mem.end)" > "$RESULTS"; }
}

# allocfault_req REQUEST: alloc-faults.sh (rr.side=server) through
# /export/.allocfault: "setup", "arm INDEX" (answered "done RC"), "disarm"
# (answered "done HIT|WHERE|BAD", lib.sh fi_report).
allocfault_req() {
    set -- $1
    case $1 in
    setup) fi_setup > /dev/null 2>&1; echo "done $?" >> /export/.allocfault ;;
    arm) fi_arm "$2" > /dev/null 2>&1; echo "done $?" >> /export/.allocfault ;;
    disarm) echo "done $(fi_report)" >> /export/.allocfault ;;
    *) echo "done 1 unknown request" >> /export/.allocfault ;;
    esac
}

# status_httpd: what the server publishes for the client (publish), over
# HTTP on the link: readable when nfsd is stopped or the client has
# unmounted, unlike the export.
STATUS_DIR=/tmp/www
status_httpd() {
    mkdir -p $STATUS_DIR && httpd -p $STATUS_PORT -h $STATUS_DIR > /dev/console 2>&1 < /dev/null
}

# publish NAME TEXT: TEXT as http://SERVER:STATUS_PORT/NAME (await_server).
publish() {
    echo "$2" > "$STATUS_DIR/$1.tmp" && mv "$STATUS_DIR/$1.tmp" "$STATUS_DIR/$1"
}

# The sunrpc client transports (rpc_xprt) that exist: one debugfs
# directory each.
rpc_xprts() { ls /sys/kernel/debug/sunrpc/rpc_xprt 2>/dev/null | wc -l; }

# The backchannel rpc_xprts of the server transport: netid rdma or rdma6
# (the server VM runs no RDMA client). Reads each one's info file, which
# calls into the transport: only while its module is loaded.
bc_xprts() {
    cat /sys/kernel/debug/sunrpc/rpc_xprt/*/info 2>/dev/null | grep -c '^netid: *rdma'
}

# bc_xprts_freed: with nfsd stopped, every backchannel rpc_xprt goes: in
# at most 30 s (the verdict is the count, polled; not a sleep).
bc_xprts_freed() {
    t0=$(uptime_s)
    until [ "$(bc_xprts)" -eq 0 ]; do
        [ $(($(uptime_s) - t0)) -lt 30 ] ||
            { echo "$(bc_xprts) backchannel rpc_xprts left 30 s after nfsd stopped (of $(rpc_xprts) rpc_xprts; $BASE_XPRTS before the transport loaded)"; return 1; }
        sleep 1
    done
    note "backchannel rpc_xprts gone $(($(uptime_s) - t0)) s after nfsd stopped; $(rpc_xprts) rpc_xprts left"
}

# no_xprt_after_unload: once rpcrdma_rs is unloaded, the rpc_xprts are
# those there were before it loaded, and reading them runs no code of the
# unloaded module (a leaked one's info file calls its ops: an oops, which
# the console scan catches).
no_xprt_after_unload() {
    n=$(rpc_xprts)
    [ "$n" -le "$BASE_XPRTS" ] ||
        { echo "$n rpc_xprts after rmmod, $BASE_XPRTS before the transport loaded: not read (would run unloaded code)"; return 1; }
    cat /sys/kernel/debug/sunrpc/rpc_xprt/*/info > /dev/null 2>&1
    note "after rmmod: $n rpc_xprts ($BASE_XPRTS before the transport loaded), each read"
}

# refuse_beside_c: with rpcrdma.ko loaded, rpcrdma_rs.ko must refuse to
# load (both register the transport "rdma"), saying why.
refuse_beside_c() {
    if insmod /modules/rpcrdma_rs.ko 2> /dev/null; then
        rmmod rpcrdma_rs
        echo "rpcrdma_rs loaded beside rpcrdma.ko"; return 1
    fi
    dmesg | grep 'rpcrdma_rs: cannot register' | grep -q 'is rpcrdma.ko loaded'
}

# xprtstats_report: the server transport's counters to the host (the
# demo prints them beside the client's mountstats line), one
# "RR-COUNTERS SOURCE name=value ..." line per source: rpcrdma_rs's
# debugfs totals, the rdma_stat_* sysctls (rpcrdma.ko's), or n/a.
xprtstats_report() {
    d=/sys/kernel/debug/rpcrdma_rs_server
    n=0
    if [ -d $d ]; then
        echo "RR-COUNTERS $d $(for f in "$d"/*; do [ ! -f "$f" ] || printf '%s=%s ' "${f##*/}" "$(cat "$f")"; done)" > "$RESULTS"
        n=1
    fi
    if ls /proc/sys/sunrpc/svc_rdma/rdma_stat_* > /dev/null 2>&1; then
        echo "RR-COUNTERS /proc/sys/sunrpc/svc_rdma $(for f in /proc/sys/sunrpc/svc_rdma/rdma_stat_*; do printf '%s=%s ' "${f##*/}" "$(cat "$f")"; done)" > "$RESULTS"
        n=1
    fi
    [ $n -eq 1 ] || echo "RR-COUNTERS n/a (no server transport counters: rr.mod=${RR_MOD:-c})" > "$RESULTS"
}

# swap_to_c: install-rs's second half. Once the client unmounted (no
# connection left; 60 s at most), the administrator's steps to put
# rpcrdma.ko back: stop nfsd, unload rpcrdma_rs, `make uninstall`, start
# nfsd. Its rdma listener must load rpcrdma.ko by itself.
swap_to_c() {
    base_qps_back || return 1
    echo 0 > /proc/fs/nfsd/threads && unload rpcrdma_rs &&
        check server_uninstall uninstall_module &&
        nfsd_listen && serving rpcrdma
}

# qp_error_trace start | stop FAULT: svcrdma_qp_error recorded through a
# fault. rxe raises no QP event on link loss or device removal (a port
# event; rdma_cm's DEVICE_REMOVAL), so none may fire; each that does must
# name the device and the client's address.
qp_error_trace() {
    if [ "$1" = start ]; then
        events_start svcrdma_qp_error
        return
    fi
    events_stop /tmp/qp_error.trace svcrdma_qp_error
    n=$(wc -l < /tmp/qp_error.trace)
    note "svcrdma_qp_error through fault $2: $n$(head -1 /tmp/qp_error.trace | sed 's/.* svcrdma_qp_error: /, /')"
    ! grep -v -m1 -E "addr=(192\.0\.2\.[0-9]+|\[2001:db8::[0-9a-f]+\]):[0-9]+ dev=[a-z]+[0-9]+ event=[A-Z_]+ \([0-9]+\)$" /tmp/qp_error.trace
}

# Faults on request: the client drops a trigger file into the export, so the
# fault lands while it has I/O going. Writing 0 threads destroys the
# listeners, so nfsd_listen re-creates them.
fault_watch() {
    while :; do
        [ -z "${RR_PROFILE:-}" ] || profile_watch
        # One read: the client removes the file when it is done with it,
        # which must not look like a new request. `[ -s ]` first, a
        # builtin: each $(cat) is a fork and exec, which the bench's
        # server CPU samples (cpu_watch) counted once per file a second.
        if [ -s /export/.populate ] && req=$(cat /export/.populate 2>/dev/null) && [ -n "$req" ] &&
            [ "${req#*done}" = "$req" ]; then
            check server_populate_dir populate_dir "$req"
        fi
        if [ -s /export/.recall ] && req=$(cat /export/.recall 2>/dev/null) && [ -n "$req" ] &&
            [ "${req#*done}" = "$req" ]; then
            check server_recall_request recall_req "$req"
        fi
        if [ -s /export/.sysctl ] && req=$(cat /export/.sysctl 2>/dev/null) && [ -n "$req" ] &&
            [ "${req#*done}" = "$req" ]; then
            check "server_sysctl_${req%% *}" sysctl_req "$req"
        fi
        if [ -s /export/.counts ] && req=$(cat /export/.counts 2>/dev/null) && [ -n "$req" ] &&
            [ "${req#*done}" = "$req" ]; then
            check "server_counts_${req%% *}" counts_req "$req"
        fi
        if [ -s /export/.twodev ] && req=$(cat /export/.twodev 2>/dev/null) && [ -n "$req" ] &&
            [ "${req#*done}" = "$req" ]; then
            check "server_twodev_${req%% *}" twodev_req "$req"
        fi
        # The client leaves once it asked; the host waits for our
        # RR-TEARDOWN-DONE (scripts/vm.sh run_pair) before powering us off,
        # and a client that waits for it reads it over HTTP (lib.sh
        # await_server): neither waits for a fixed time a slow teardown
        # could outlast.
        if [ -e /export/.teardown ]; then
            rm -f /export/.teardown
            if [ -n "${RR_TRACE:-}" ]; then
                check server_trace_stop trace_stop &&
                    check server_trace_events trace_check_server
            fi
            [ "${RR_MOD:-c}" = none ] || check server_teardown_unload_no_leak teardown
            rc=$?
            # Its own result; the client's wait for the teardown is not
            # about it.
            [ -z "${RR_UDLOST:-}" ] || check rxe_ud_send_lost_keeps_qp ud_send_lost
            echo "RR-TEARDOWN-DONE" > "$RESULTS"
            publish teardown "done $rc"
        fi
        if [ -s /export/.allocfault ] && req=$(cat /export/.allocfault 2>/dev/null) && [ -n "$req" ] &&
            [ "${req#*done}" = "$req" ]; then
            allocfault_req "$req"
        fi
        # nfs-io.sh's server_counters.
        if [ -s /export/.xprtstats ] && req=$(cat /export/.xprtstats 2>/dev/null) && [ "$req" = req ]; then
            xprtstats_report
            echo done > /export/.xprtstats
        fi
        # srv-faults.sh bond_failover: answered over HTTP, the client
        # having unmounted.
        if [ -e /export/.fault-bond ]; then
            rm -f /export/.fault-bond
            check server_fault_bond_failover bond_failover
            publish bond "done $?"
        fi
        # install-rs: answered over HTTP, the client having unmounted.
        if [ -e /export/.uninstall ]; then
            rm -f /export/.uninstall
            check server_uninstalled_rdma_listener_loads_c swap_to_c
            publish uninstall "done $?"
        fi
        # Each fault answers in /export/.fault-NAME.done once over, for
        # clients that wait for it (srv-faults.sh); reconnect.sh does not.
        # The soak (soak.sh) writes "SECS ID": the length of a link
        # outage or device removal, and an ID under which the answer is
        # also published over HTTP (fault-ID), readable while the mount
        # is stuck. Others write "go": the defaults.
        for f in nfsd link devdel threads cmloss; do
            [ -e /export/.fault-$f ] || continue
            set -- $(cat /export/.fault-$f 2>/dev/null)
            rm -f /export/.fault-$f
            secs=${1:-} id=${2:-}
            case $secs in '' | *[!0-9]*) secs= ;; esac
            [ "${RR_MOD:-c}" != rs ] || qp_error_trace start
            case $f in
            nfsd) check server_fault_nfsd_restart nfsd_restart ;;
            link) check server_fault_link_loss link_loss "${secs:-20}" $id ;;
            devdel) check server_fault_device_removed_readded dev_del "${secs:-10}" ;;
            threads) check server_fault_thread_churn thread_churn 2 16 8 ;;
            cmloss) check server_fault_cm_message_lost cm_send_lost ;;
            esac
            rc=$?
            [ "${RR_MOD:-c}" != rs ] || check server_fault_${f}_qp_events qp_error_trace stop $f
            echo "done $rc" > /export/.fault-$f.done
            [ -z "$id" ] || publish "fault-$id" "done $rc gsi=$(gsi_state)"
        done
        sleep 1
    done
}

check server_net net_up $SERVER4 $SERVER6 &&
    BASELINE=$(rdma_counts) && BASE_QPS=$(qp_count) && BASE_XPRTS=$(rpc_xprts) &&
    { [ -z "${RR_SOAK:-}" ] || counts_snapshot > /tmp/mem.base; } &&
    check server_transport load_transport "${RR_MOD:-c}" &&
    { [ "${RR_MOD:-c}" != c ] || [ ! -e /modules/rpcrdma_rs.ko ] ||
        check server_rs_refused_beside_c refuse_beside_c; } &&
    { [ -z "${RR_TRACE:-}" ] || check server_trace_start trace_start \
        'svcrdma_decode_rqst=xid != 0' 'svcrdma_wc_recv=received > 0' \
        'svcrdma_post_send=num_sge > 0' 'svcrdma_wc_send=completion_id >= 0' \
        'svcrdma_post_read_chunk=sqecount >= 0' 'svcrdma_wc_read=read_latency >= 0' \
        'svcrdma_post_write_chunk=completion_id >= 0' 'svcrdma_wc_write=cq_id >= 0' \
        'svcrdma_sq_full=depth > 0' 'svcrdma_wc_recv_flush=vendor_err >= 0' \
        'svcrdma_accept_err=addr ~ "*"' 'svcrdma_pd_err=status != 0' \
        'svcrdma_small_wrch_err=num_segs > 0'; } &&
    check server_export export_fs &&
    check server_nfsd_tune nfsd_tune &&
    check server_rpc_daemons rpc_daemons &&
    check server_nfsd_listen nfsd_listen &&
    { [ "${RR_MOD:-c}" != install ] || check server_rdma_listener_loads_rs serving rpcrdma_rs; } &&
    check server_status_httpd status_httpd &&
    echo "RR-READY" > "$RESULTS"
# The host powers us off once the client is done.
[ "${RR_SRVCPU:-}" != on ] || cpu_watch &
[ -z "${RR_SOAK:-}" ] || gsi_watch &
fault_watch

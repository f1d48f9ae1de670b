# Guest-side helpers shared by the scenario scripts (sourced by /init).
# shellcheck shell=sh

RESULTS=/dev/ttyS1
# Busybox's shell runs its own applets before searching PATH: name the
# iproute2 binary in full, or the applet (which knows no nodad) runs instead.
IP=/usr/sbin/ip
FAILED=0
SERVER4=192.0.2.1
SERVER6=2001:db8::1
# Fixed service ports, so NFSv3 clients need no rpcbind query.
# STATUS_PORT: the server's HTTP status (server.sh publish).
STATUS_PORT=8080
NFS_PORT=2049
NFS_RDMA_PORT=20049
MOUNTD_PORT=20048

# result NAME PASS|FAIL [detail]: one line the host runner parses.
result() {
    [ "$2" = PASS ] || FAILED=1
    echo "RR-RESULT $1 $2${3:+ $3}" > "$RESULTS"
    echo "RR-RESULT $1 $2${3:+ $3}"
}
note() { echo "RR-NOTE $*" > "$RESULTS"; echo "== $*"; }

# check NAME CMD...: run CMD, report its exit status as the result NAME and
# return it, so that later steps can depend on earlier ones.
check() {
    name=$1; shift
    if out=$("$@" 2>&1); then
        result "$name" PASS
    else
        result "$name" FAIL "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
        return 1
    fi
}

# console_bg CMD...: run CMD in the background with its output on the
# console. The redirection is exec'd: ash keeps a copy of the old fd when it
# redirects a function call, and that copy held check's $(...) open until
# CMD ended.
console_bg() {
    (exec > /dev/console 2>&1 < /dev/null; "$@") &
}

# cm_counters: what rxe0's IB CM sent and received, by message type (REQ,
# REP, RTU, REJ, MRA, DREQ, DREP), and its duplicates and retries: where
# a connection request that never completes stopped.
cm_counters() {
    for g in cm_tx_msgs cm_tx_retries cm_rx_msgs cm_rx_duplicates; do
        d=/sys/class/infiniband/rxe0/ports/1/$g
        [ -d "$d" ] || continue
        line="$g:"
        for m in req rep rtu rej mra dreq drep; do
            line="$line $m $(cat "$d/$m" 2>/dev/null)"
        done
        echo "$line"
    done
}

# blocked_log: every task in D state, and every kworker inside the RDMA
# stack (ib_cm runs one connection event at a time: a handler that blocks
# leaves every later request unanswered), with their stacks.
blocked_log() {
    for d in /proc/[0-9]*; do
        comm=$(cat "$d/comm" 2>/dev/null)
        if grep -q '^State:.*D' "$d/status" 2>/dev/null; then
            echo "== D $comm ${d#/proc/}: $(tr '\n' ' ' < "$d/stack" 2>/dev/null)"
        elif [ "${comm#kworker}" != "$comm" ]; then
            st=$(tr '\n' ' ' < "$d/stack" 2>/dev/null)
            case $st in *cm_*|*cma_*|*rxe*|*rpcrdma*|*ib_*) echo "== $comm ${d#/proc/}: $st" ;; esac
        fi
    done
}

# await_server NAME SECS: until the server published NAME (server.sh
# publish; "done RC"), SECS at most; prints it, fails unless RC is 0.
# For what the server does once the client has unmounted, where a fixed
# wait before powering off could end the run before the server reported.
await_server() {
    t0=$(cut -d. -f1 /proc/uptime)
    until st=$(timeout -s KILL 15 wget -q -O - "http://$SERVER4:$STATUS_PORT/$1" 2>/dev/null) && [ -n "$st" ]; do
        [ $(($(cut -d. -f1 /proc/uptime) - t0)) -le "$2" ] || { echo "the server did not publish $1 in $2 s"; return 1; }
        sleep 1
    done
    echo "server $1: $st"
    [ "$st" = "done 0" ]
}

# Whole seconds since boot.
uptime_s() { cut -d. -f1 /proc/uptime; }

finish() {
    echo "RR-DONE $FAILED" > "$RESULTS"
    sync
    reboot -f
}

# net_up ADDR4 ADDR6: address eth0 and put a soft-RoCE device on it.
net_up() {
    $IP link set lo up &&
        $IP link set eth0 up &&
        $IP addr add "$1/24" dev eth0 &&
        $IP -6 addr add "$2/64" dev eth0 nodad || return 1
    rdma link add rxe0 type rxe netdev eth0 || return 1
    note "rxe0 on eth0 $1 $2"
}

# cpu_ticks: this VM's CPU time so far, in USER_HZ ticks: "user sys
# softirq idle other" (user includes nice, idle includes iowait, other is
# hardirq and steal). The bench's CPU shares (client and server) come from
# two of these around a job.
cpu_ticks() {
    awk '$1 == "cpu" { print $2 + $3, $4, $8, $5 + $6, $7 + $9 }' /proc/stat
}

# sched_counts: this VM's context switches, interrupts and softirqs so
# far ("ctxt intr softirq" of /proc/stat) and the RPCs nfsd has served
# (0 without nfsd). The bench divides what a job added to each, and the
# CPU ticks, by the RPCs: how often and how long a server works per RPC.
sched_counts() {
    { cat /proc/stat; cat /proc/net/rpc/nfsd 2>/dev/null; } |
        awk '$1 == "ctxt" { c = $2 } $1 == "intr" { i = $2 } $1 == "softirq" { s = $2 }
            $1 == "rpc" { r = $2 } END { print c, i, s, r + 0 }'
}

# load_transport c|rs|none: insmod the RPC/RDMA transport this run asks for,
# with the tunables in RR_MODPARAMS (comma-separated name=value; the names
# are rpcrdma_rs's parameters: max_inline_read, max_inline_write,
# slot_table_entries). rpcrdma_rs takes them as module parameters and must
# know each one; rpcrdma.ko has sysctls instead, set (and read back) before
# anything mounts.
load_transport() {
    params=$(echo "${RR_MODPARAMS:-}" | tr , ' ')
    case $1 in
    c)
        insmod /modules/rpcrdma.ko || return 1
        for kv in $params; do
            case ${kv%%=*} in
            max_inline_read | max_inline_write | slot_table_entries) ;;
            *) echo "rpcrdma.ko has no tunable for '$kv'"; return 1 ;;
            esac
            f=/proc/sys/sunrpc/rdma_${kv%%=*}
            echo "${kv#*=}" > "$f" || return 1
            [ "$(cat "$f")" = "${kv#*=}" ] || { echo "$f: reads $(cat "$f"), not ${kv#*=}"; return 1; }
        done
        ;;
    rs)
        # shellcheck disable=SC2086 # one word per parameter
        insmod /modules/rpcrdma_rs.ko $params || return 1
        if dmesg | grep "rpcrdma_rs: unknown parameter"; then return 1; fi
        for kv in $params; do
            f=/sys/module/rpcrdma_rs/parameters/${kv%%=*}
            [ ! -e "$f" ] || [ "$(cat "$f")" = "${kv#*=}" ] ||
                { echo "$f reads $(cat "$f"), not ${kv#*=}"; return 1; }
        done
        ;;
    install)
        # Installed, not loaded: the kernel loads it when nfsd or mount
        # asks for the transport (install-rs).
        [ -z "$params" ] || { echo "install takes no parameters: '$params'"; return 1; }
        install_module ;;
    none) [ -z "$params" ] || { echo "no transport module for '$params'"; return 1; } ;;
    *)    echo "unknown transport module '$1'"; return 1 ;;
    esac
    [ -z "$params" ] || note "transport $1 loaded with $params"
}

# The admin guide's install: what `make install` runs, from the source
# tree with the built module beside it (scripts/vm.sh vm_prepare), for
# the running kernel. Then every name the kernel asks for (rpcrdma for
# proto=rdma, rpcrdma6, svcrdma for nfsd, and the old xprtrdma) must
# resolve to rpcrdma_rs alone, through the modprobe the kernel runs;
# nothing is loaded yet.
RS_SRC=/src/rpcrdma_rs
install_module() {
    [ "$(cat /proc/sys/kernel/modprobe)" = /sbin/modprobe ] && [ -x /sbin/modprobe ] ||
        { echo "the kernel runs $(cat /proc/sys/kernel/modprobe), not kmod's /sbin/modprobe"; return 1; }
    $RS_SRC/scripts/install.sh install || return 1
    for n in rpcrdma rpcrdma6 svcrdma xprtrdma; do
        # Unquoted: one line, spaces collapsed; a second module would show.
        # shellcheck disable=SC2046
        got=$(echo $(/sbin/modprobe --show-depends "$n" 2>&1))
        [ "$got" = "insmod /lib/modules/$(uname -r)/updates/rpcrdma_rs.ko" ] ||
            { echo "modprobe $n would run: $got"; return 1; }
    done
    ! grep -q '^rpcrdma' /proc/modules || { echo "loaded already: $(cat /proc/modules)"; return 1; }
}

# uninstall_module: the admin guide's `make uninstall`; then the names
# resolve to rpcrdma.ko again.
uninstall_module() {
    $RS_SRC/scripts/install.sh uninstall || return 1
    for n in rpcrdma svcrdma; do
        # shellcheck disable=SC2046
        got=$(echo $(/sbin/modprobe --show-depends "$n" 2>&1))
        [ "$got" = "insmod /lib/modules/$(uname -r)/kernel/net/sunrpc/xprtrdma/rpcrdma.ko" ] ||
            { echo "modprobe $n would run: $got"; return 1; }
    done
    [ ! -e /etc/modprobe.d/rpcrdma_rs.conf ] && [ ! -e "/lib/modules/$(uname -r)/updates/rpcrdma_rs.ko" ]
}

# serving rpcrdma_rs|rpcrdma: that module is loaded (by the kernel: the
# scenarios that use this load nothing by hand) and the other is not.
serving() {
    other=rpcrdma
    [ "$1" = rpcrdma ] && other=rpcrdma_rs
    mods=$(cut -d' ' -f1 /proc/modules | tr '\n' ' ')
    if grep -q "^$1 " /proc/modules && ! grep -q "^$other " /proc/modules; then
        note "$1 serves; loaded modules: $mods"
    else
        echo "loaded modules: $mods; want $1 and not $other"; return 1
    fi
}

# unload MODULE: rmmod, retrying for a while. sunrpc destroys a transport
# from a work item after the last reference goes, so the module can stay
# busy for a moment after umount returns.
unload() {
    i=0
    until rmmod "$1"; do
        i=$((i + 1))
        [ $i -lt 10 ] || return 1
        sleep 1
    done
    [ $i -eq 0 ] || echo "unloaded after $i retries"
}

# funcs_report NAME RPCS: the counts of ftrace's function profiler
# (bench.sh's PROFILER=funcs) to the host: the RPCs nfsd served meanwhile,
# then each kernel function called, with its calls, most first.
funcs_report() {
    { echo "RR-PERF-BEGIN $1"
      echo "rpcs $2"
      cat /sys/kernel/tracing/trace_stat/function* |
          awk '$2 ~ /^[0-9]+$/ { print $2, $1 }' | sort -rn | head -n 600
      echo "RR-PERF-END $1"; } > "$RESULTS"
}

# perf_report NAME FILE: the top of a cpu-clock profile (bench.sh's
# PROFILE) to the host: by module, by function, and the transport module's
# own functions.
perf_report() {
    { echo "RR-PERF-BEGIN $1"
      perf report -i "$2" --stdio --no-children --sort dso --percent-limit 0.1 2>&1 |
          grep -v '^#' | grep -v '^$' | head -n 20
      perf report -i "$2" --stdio --no-children --sort dso,sym --percent-limit 0.3 2>&1 |
          grep -v '^#' | grep -v '^$' | head -n 80
      echo "-- the transport module's functions"
      perf report -i "$2" --stdio --no-children --sort dso,sym 2>&1 | grep '\[rpcrdma' | head -n 40
      echo "RR-PERF-END $1"; } > "$RESULTS"
}

# rr.trace=1: rpcrdma_rs's trace events, recorded as an administrator
# would (tracefs, the rpcrdma system) and checked for sane fields.
TRACEFS=/sys/kernel/tracing
TRACE_OUT=/tmp/rpcrdma.trace

# trace_start EVENT=FILTER...: clears the buffer, gives each EVENT a filter
# on rpcrdma.ko's field names (a field the event lacks makes the write
# fail), and enables every rpcrdma event.
trace_start() {
    [ -d $TRACEFS/events ] || mount -t tracefs nodev $TRACEFS || return 1
    [ -d $TRACEFS/events/rpcrdma ] || { echo "no rpcrdma trace events"; return 1; }
    echo 0 > $TRACEFS/tracing_on && echo > $TRACEFS/trace &&
        echo 8192 > $TRACEFS/buffer_size_kb || return 1
    for ef in "$@"; do
        echo "${ef#*=}" > "$TRACEFS/events/rpcrdma/${ef%%=*}/filter" ||
            { echo "filter '${ef#*=}' refused by ${ef%%=*}"; return 1; }
    done
    echo 1 > $TRACEFS/events/rpcrdma/enable && echo 1 > $TRACEFS/tracing_on
}

# trace_stop: disables the events and keeps what they recorded in
# TRACE_OUT.
trace_stop() {
    echo 0 > $TRACEFS/events/rpcrdma/enable && cat $TRACEFS/trace > $TRACE_OUT &&
        echo > $TRACEFS/trace || return 1
    note "rpcrdma events: $(awk '$5 ~ /^(xprt|svc)rdma_/ { n[$5]++ } END { for (e in n) printf "%s%d ", e, n[e] }' $TRACE_OUT)"
    grep -q "LOST\|overrun" $TRACE_OUT && note "trace buffer overran"
    return 0
}

# trace_count EVENT: how many EVENT lines TRACE_OUT holds.
trace_count() { grep -c " $1: " $TRACE_OUT; }

# trace_fired EVENT...: each EVENT fired at least once.
trace_fired() {
    for e in "$@"; do
        [ "$(trace_count "$e")" -gt 0 ] || { echo "$e never fired"; return 1; }
    done
}

# trace_sample EVENT...: the first line of each EVENT to the host log.
trace_sample() {
    for e in "$@"; do
        note "$(grep -m1 " $e: " $TRACE_OUT | sed "s/.* \($e: \)/\1/")"
    done
}

# trace_field EVENT FIELD: FIELD's values (the text after "FIELD=") in
# EVENT's lines.
trace_field() {
    grep " $1: " $TRACE_OUT | sed -n "s/.* $2=\([^ ]*\).*/\1/p"
}

# trace_check_client: the events of a mount's I/O through rpcrdma_rs.
trace_check_client() {
    # read_back remounts: the first connection was torn down.
    trace_fired xprtrdma_connect xprtrdma_disconnect xprtrdma_marshal xprtrdma_post_send \
        xprtrdma_wc_receive xprtrdma_reply xprtrdma_mr_map || return 1
    grep " xprtrdma_connect: " $TRACE_OUT | grep -q "peer=\[$SERVER4\]:$NFS_RDMA_PORT rc=0 connection status=1" ||
        { echo "no connect to $SERVER4:$NFS_RDMA_PORT: $(grep -m1 ' xprtrdma_connect: ' $TRACE_OUT)"; return 1; }
    m=$(trace_count xprtrdma_marshal) p=$(trace_count xprtrdma_post_send)
    [ "$m" -eq "$p" ] || { echo "$m Calls marshalled, $p Sends posted"; return 1; }
    # Every Reply's XID is one a Call was marshalled with; the filters
    # let no zero XID through.
    trace_field xprtrdma_marshal xid | sort -u > /tmp/marshal.xids
    trace_field xprtrdma_reply xid | sort -u > /tmp/reply.xids
    [ ! -s /tmp/reply.xids ] && { echo "no Reply XID"; return 1; }
    awk 'NR == FNR { m[$1] = 1; next } !($1 in m)' /tmp/marshal.xids /tmp/reply.xids > /tmp/unmatched.xids
    [ ! -s /tmp/unmatched.xids ] ||
        { echo "$(wc -l < /tmp/unmatched.xids) Reply XIDs never marshalled: $(head -3 /tmp/unmatched.xids | tr '\n' ' ')"; return 1; }
    ! grep -q "xid=0x00000000" $TRACE_OUT || { echo "a zero XID passed the filter"; return 1; }
    # A transport header is 28 bytes at least (RDMA_MSG, no chunks), and
    # fits the 4 KiB inline threshold; every Call has an RPC header.
    trace_field xprtrdma_marshal hdr | awk '$1 < 28 || $1 > 4096 { print "hdr=" $1; exit 1 }' || return 1
    trace_field xprtrdma_marshal xdr | awk -F/ '$1 < 40 { print "xdr=" $0; exit 1 }' || return 1
    trace_field xprtrdma_wc_receive received | awk '$1 < 28 { print "received=" $1; exit 1 }' || return 1
    trace_field xprtrdma_reply credits | awk '$1 < 1 { print "credits=" $1; exit 1 }' || return 1
    # An MR maps 1 to 1 MiB in at least one entry, toward the device for a
    # Read chunk, from it for a Write or Reply chunk.
    grep " xprtrdma_mr_map: " $TRACE_OUT | sed -n 's/.* nents=\([0-9]*\) \([0-9]*\)@0x[0-9a-f]*:0x[0-9a-f]* (\(.*\))$/\1 \2 \3/p' |
        awk '{ n++ } $1 < 1 || $2 < 1 || $2 > 1048576 || ($3 != "TO_DEVICE" && $3 != "FROM_DEVICE") { print "mr_map: " $0; exit 1 }
             END { if (!n) { print "no mr_map line parsed"; exit 1 } }' || return 1
    trace_sample xprtrdma_connect xprtrdma_marshal xprtrdma_post_send xprtrdma_wc_receive \
        xprtrdma_reply xprtrdma_mr_map xprtrdma_disconnect
    note "client trace: $m Calls, $(wc -l < /tmp/reply.xids) Reply XIDs, all marshalled"
}

# trace_check_server: the events of nfsd's Calls through rpcrdma_rs.
trace_check_server() {
    trace_fired svcrdma_wc_recv svcrdma_decode_rqst svcrdma_post_send svcrdma_wc_send || return 1
    trace_field svcrdma_decode_rqst vers | awk '$1 != 1 { print "vers=" $1; exit 1 }' || return 1
    trace_field svcrdma_decode_rqst proc | awk '$1 != "RDMA_MSG" && $1 != "RDMA_NOMSG" { print "proc=" $1; exit 1 }' || return 1
    trace_field svcrdma_decode_rqst hdrlen | awk '$1 < 28 { print "hdrlen=" $1; exit 1 }' || return 1
    trace_field svcrdma_decode_rqst credits | awk '$1 < 1 { print "credits=" $1; exit 1 }' || return 1
    trace_field svcrdma_wc_recv received | awk '$1 < 28 { print "received=" $1; exit 1 }' || return 1
    ! grep -q "xid=0x00000000" $TRACE_OUT || { echo "a zero XID passed the filter"; return 1; }
    c=$(trace_count svcrdma_decode_rqst) s=$(trace_count svcrdma_post_send)
    # Each Call is answered by one Send (backchannel Calls add more).
    [ "$s" -ge "$c" ] || { echo "$c Calls decoded, $s Sends posted"; return 1; }
    trace_sample svcrdma_wc_recv svcrdma_decode_rqst svcrdma_post_send svcrdma_wc_send
    note "server trace: $c Calls decoded, $s Sends posted"
}

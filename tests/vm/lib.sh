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
# The software RDMA device on eth0 (rr.rdma): rxe (RoCE) or siw (iWARP).
RDMA_TYPE=${RR_RDMA:-rxe}
RDMA_DEV=${RDMA_TYPE}0
# The device on the second link (rr.links=2).
RDMA_DEV2=${RDMA_TYPE}1
NFS_PORT=2049
NFS_RDMA_PORT=20049
MOUNTD_PORT=20048

# result NAME PASS|FAIL [detail]: one line the host runner parses.
# RR_PART (cells.sh) prefixes the name with the part that reports it.
result() {
    [ "$2" = PASS ] || FAILED=1
    echo "RR-RESULT ${RR_PART:+$RR_PART/}$1 $2${3:+ $3}" > "$RESULTS"
    echo "RR-RESULT ${RR_PART:+$RR_PART/}$1 $2${3:+ $3}"
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

# lines_in [-v] KEYS FILE: FILE's lines that are (-v: are not) lines of
# KEYS. (busybox has no comm.)
lines_in() {
    _inv=0; [ "$1" != -v ] || { _inv=1; shift; }
    awk -v inv=$_inv 'FILENAME == ARGV[1] { k[$0] = 1; next } (($0 in k) != inv)' "$1" "$2"
}

# console_bg CMD...: run CMD in the background with its output on the
# console. The redirection is exec'd: ash keeps a copy of the old fd when it
# redirects a function call, and that copy held check's $(...) open until
# CMD ended.
console_bg() {
    (exec > /dev/console 2>&1 < /dev/null; "$@") &
}

# cm_counters: what the device's IB CM sent and received, by message type
# (REQ, REP, RTU, REJ, MRA, DREQ, DREP), and its duplicates and retries:
# where a connection request that never completes stopped. (iWARP has no
# IB CM: nothing.)
cm_counters() {
    for g in cm_tx_msgs cm_tx_retries cm_rx_msgs cm_rx_duplicates; do
        d=/sys/class/infiniband/$RDMA_DEV/ports/1/$g
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

# net_up ADDR4 ADDR6: address eth0 and put the software RDMA device on it
# (soft-RoCE, or siw with rr.rdma=siw). Once done, again is a no-op: the
# parts of a cells.sh boot each start with it.
net_up() {
    if rdma link show "$RDMA_DEV/1" > /dev/null 2>&1; then
        $IP addr show dev eth0 | grep -q " $1/24 " || return 1
        return 0
    fi
    $IP link set lo up &&
        $IP link set eth0 up &&
        $IP addr add "$1/24" dev eth0 &&
        $IP -6 addr add "$2/64" dev eth0 nodad || return 1
    rdma link add "$RDMA_DEV" type "$RDMA_TYPE" netdev eth0 || return 1
    note "$RDMA_DEV on eth0 $1 $2"
    [ "${RR_LINKS:-1}" = 2 ] || return 0
    # rr.links=2 (scripts/vm.sh): a second link, its own subnet and RDMA
    # device; our host number on it is the one we have on eth0.
    $IP link set eth1 up && $IP addr add "$(addr2 "$1")/24" dev eth1 &&
        rdma link add "$RDMA_DEV2" type "$RDMA_TYPE" netdev eth1 || return 1
    note "$RDMA_DEV2 on eth1 $(addr2 "$1")"
}

# addr2 ADDR4: ADDR4's host on the second link (rr.links=2).
addr2() { echo "192.0.3.${1##*.}"; }

# on_rdma_dev PORT: an RDMA connection to the server's PORT runs on our
# RDMA device ($RDMA_DEV, the only one there is): what a cell over siw
# must show, or its traffic went elsewhere.
on_rdma_dev() {
    ids=$(rdma resource show cm_id 2>&1)
    echo "$ids" | grep -E "^link $RDMA_DEV/1 .*state CONNECT.* dst-addr .*:$1( |\$)" ||
        { echo "no connected cm_id on $RDMA_DEV to port $1: $(echo "$ids" | tr '\n' ' ')"; return 1; }
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
      echo "-- the kernel's Rust helpers (out of line without LTO)"
      perf report -i "$2" --stdio --no-children --sort dso,sym 2>&1 | grep ' rust_helper_' | head -n 30
      echo "-- the transport module's hottest instructions (samples, symbol+offset)"
      perf script -i "$2" -F ip,sym,symoff,dso 2>/dev/null | grep '(\[rpcrdma' |
          awk '{ print $2 }' | sort | uniq -c | sort -rn | head -n 150
      echo "RR-PERF-END $1"; } > "$RESULTS"
}

# --- rpcrdma.ko's sysctls (issue 28), as an administrator uses them ------
# Both modules must pass the same checks: rpcrdma_rs registers rpcrdma.ko's
# tables with the same names, modes, ranges and refusals.
SYSCTL_CLIENT="rdma_inline_write_padding rdma_max_inline_read rdma_max_inline_write rdma_memreg_strategy rdma_pad_optimize rdma_slot_table_entries"
SYSCTL_SVC="max_outbound_read_requests max_req_size max_requests rdma_stat_read rdma_stat_recv rdma_stat_rq_poll rdma_stat_rq_prod rdma_stat_rq_starve rdma_stat_sq_poll rdma_stat_sq_prod rdma_stat_sq_starve rdma_stat_write"

# sysctl_is KEY VALUE: KEY reads VALUE.
sysctl_is() {
    sysctl_got=$(sysctl -n "$1" 2>&1) || { echo "sysctl -n $1: $sysctl_got"; return 1; }
    [ "$sysctl_got" = "$2" ] || { echo "$1 reads '$sysctl_got', not '$2'"; return 1; }
}

# sysctl_set KEY VALUE: sysctl -w succeeds and KEY reads VALUE.
sysctl_set() {
    out=$(sysctl -w "$1=$2" 2>&1) || { echo "sysctl -w $1=$2: $out"; return 1; }
    sysctl_is "$1" "$2"
}

# sysctl_refused KEY VALUE: sysctl -w and a write into /proc/sys both fail
# with EINVAL, and KEY keeps its value.
sysctl_refused() {
    before=$(sysctl -n "$1") || return 1
    if out=$(sysctl -w "$1=$2" 2>&1); then echo "sysctl -w $1=$2 accepted: $out"; return 1; fi
    case $out in *"Invalid argument"*) ;; *) echo "sysctl -w $1=$2: '$out', not EINVAL"; return 1 ;; esac
    f=/proc/sys/$(echo "$1" | tr . /)
    if out=$(sh -c 'echo "$1" > "$2"' sh "$2" "$f" 2>&1); then echo "echo $2 > $f accepted"; return 1; fi
    case $out in *"Invalid argument"*) ;; *) echo "echo $2 > $f: '$out', not EINVAL"; return 1 ;; esac
    sysctl_is "$1" "$before"
}

# sysctl_tables MODULE (rpcrdma or rpcrdma_rs, loaded): every file of
# both tables exists with mode 0644 and reads its default; each bound is
# accepted and the value beyond it refused; the retired counters take
# only 0; with rpcrdma_rs, each sysctl and its module parameter are one
# value. Leaves every value at its default.
sysctl_tables() {
    # ash has no local variables: names the helpers above do not use.
    s=sunrpc v=sunrpc.svc_rdma
    got=$(cd /proc/sys/sunrpc && ls -d rdma_* | tr '\n' ' ')
    [ "$got" = "$SYSCTL_CLIENT " ] || { echo "/proc/sys/sunrpc/rdma_*: $got"; return 1; }
    got=$(ls /proc/sys/sunrpc/svc_rdma | tr '\n' ' ')
    [ "$got" = "$SYSCTL_SVC " ] || { echo "/proc/sys/sunrpc/svc_rdma: $got"; return 1; }
    for f in /proc/sys/sunrpc/rdma_* /proc/sys/sunrpc/svc_rdma/*; do
        m=$(stat -c %a "$f")
        [ "$m" = 644 ] || { echo "$f: mode $m"; return 1; }
    done
    for kv in $s.rdma_slot_table_entries=128 $s.rdma_max_inline_read=4096 \
        $s.rdma_max_inline_write=4096 $s.rdma_inline_write_padding=0 \
        $s.rdma_memreg_strategy=5 $s.rdma_pad_optimize=0 $v.max_requests=128 \
        $v.max_req_size=4096 $v.max_outbound_read_requests=16 $v.rdma_stat_rq_starve=0 \
        $v.rdma_stat_rq_poll=0 $v.rdma_stat_rq_prod=0 $v.rdma_stat_sq_poll=0 \
        $v.rdma_stat_sq_prod=0; do
        sysctl_is "${kv%%=*}" "${kv#*=}" || return 1
    done
    for c in read recv write sq_starve; do
        n=$(sysctl -n $v.rdma_stat_$c) && [ "$n" -ge 0 ] 2>/dev/null ||
            { echo "$v.rdma_stat_$c reads '$n'"; return 1; }
    done
    # KEY=ACCEPTED,...: each accepted and read back, the last the default.
    for kv in $s.rdma_slot_table_entries=4,16384,128 $s.rdma_max_inline_read=1024,65536,4096 \
        $s.rdma_max_inline_write=1024,65536,4096 $s.rdma_inline_write_padding=4096,0 \
        $s.rdma_memreg_strategy=0,6,5 $s.rdma_pad_optimize=-1,7,0 $v.max_requests=4,16384,128 \
        $v.max_req_size=65536,4096 $v.max_outbound_read_requests=1,255,16 \
        $v.rdma_stat_rq_starve=0 $v.rdma_stat_sq_prod=0; do
        for x in $(echo "${kv#*=}" | tr , ' '); do
            sysctl_set "${kv%%=*}" "$x" || return 1
        done
    done
    for kv in $s.rdma_slot_table_entries=3 $s.rdma_slot_table_entries=16385 \
        $s.rdma_max_inline_read=1023 $s.rdma_max_inline_read=65537 \
        $s.rdma_max_inline_write=1023 $s.rdma_max_inline_write=65537 \
        $s.rdma_inline_write_padding=-1 $s.rdma_inline_write_padding=4097 \
        $s.rdma_memreg_strategy=-1 $s.rdma_memreg_strategy=7 $s.rdma_pad_optimize=x \
        $v.max_requests=3 $v.max_requests=16385 $v.max_req_size=4095 \
        $v.max_req_size=65537 $v.max_outbound_read_requests=0 \
        $v.max_outbound_read_requests=256 $v.rdma_stat_rq_starve=1 \
        $v.rdma_stat_rq_poll=1 $v.rdma_stat_rq_prod=1 $v.rdma_stat_sq_poll=1 \
        $v.rdma_stat_sq_prod=1; do
        sysctl_refused "${kv%%=*}" "${kv#*=}" || return 1
    done
    [ "$1" = rpcrdma_rs ] || return 0
    OLD_IFS=$IFS
    # SYSCTL:PARAMETER:VALUE:DEFAULT: a write to either shows in both.
    p=/sys/module/rpcrdma_rs/parameters
    for pair in $s.rdma_max_inline_read:max_inline_read:2048:4096 \
        $s.rdma_max_inline_write:max_inline_write:2048:4096 \
        $s.rdma_slot_table_entries:slot_table_entries:64:128 \
        $v.max_requests:svc_max_requests:64:128 $v.max_req_size:svc_max_inline:8192:4096; do
        # shellcheck disable=SC2086 # split at the colons
        IFS=: && set -- $pair && IFS=$OLD_IFS
        key=$1 param=$2 val=$3 def=$4
        sysctl_set "$key" "$val" || return 1
        [ "$(cat $p/$param)" = "$val" ] || { echo "$key=$val, but $p/$param reads $(cat $p/$param)"; return 1; }
        echo "$def" > $p/$param || return 1
        sysctl_is "$key" "$def" || { echo "after $p/$param=$def"; return 1; }
    done
}

# await_exit PID SECS: wait until process PID has ended, SECS s at most;
# fails if it still runs then.
await_exit() {
    _w=0
    while kill -0 "$1" 2>/dev/null; do
        _w=$((_w + 1))
        [ $_w -le "$2" ] || return 1
        sleep 1
    done
}

# server_ask FILE SECS REQUEST...: hand REQUEST to the server through FILE
# in the export (server.sh watches for it) and wait, SECS s at most, for
# its "done" line, left in $answer.
server_ask() {
    _f=$1 _secs=$2
    shift 2
    rm -f "$_f" && echo "$*" > "$_f" || return 1
    _i=0
    until answer=$(grep '^done' "$_f" 2>/dev/null); do
        _i=$((_i + 1))
        [ $_i -le "$_secs" ] || { echo "server did not answer '$*'"; return 1; }
        sleep 1
    done
}

# rr.trace=1: rpcrdma_rs's trace events, recorded as an administrator
# would (tracefs, the rpcrdma system) and checked for sane fields.
TRACEFS=/sys/kernel/tracing
TRACE_OUT=/tmp/rpcrdma.trace
# TRACE_OUT's lines split by event, one file each (trace_stop).
TRACE_DIR=/tmp/rpcrdma.trace.d

# TRACE_ALSO: more events to record beside the rpcrdma system's, as
# SYSTEM/EVENT words (recall.sh: the NFS client's nfs4/nfs4_cb_sequence).
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
    for e in ${TRACE_ALSO:-}; do
        echo 1 > "$TRACEFS/events/$e/enable" || { echo "no event $e"; return 1; }
    done
    echo 1 > $TRACEFS/events/rpcrdma/enable && echo 1 > $TRACEFS/tracing_on
}

# trace_stop: disables the events and keeps what they recorded in
# TRACE_OUT.
trace_stop() {
    for e in ${TRACE_ALSO:-}; do echo 0 > "$TRACEFS/events/$e/enable"; done
    echo 0 > $TRACEFS/events/rpcrdma/enable && cat $TRACEFS/trace > $TRACE_OUT &&
        echo > $TRACEFS/trace || return 1
    # One pass over what may be tens of thousands of lines: each check
    # reads its event's file, not the whole trace (a pass costs seconds
    # under TCG).
    rm -rf $TRACE_DIR && mkdir $TRACE_DIR || return 1
    note "rpcrdma events: $(awk -v d=$TRACE_DIR '
        { for (i = 1; i <= NF && i < 8; i++) if ($i ~ /^((xprt|svc)rdma|nfs4)_[a-z_0-9]*:$/) {
              e = substr($i, 1, length($i) - 1); n[e]++; print > (d "/" e); break } }
        END { for (e in n) printf "%s:%d ", e, n[e] }' $TRACE_OUT)"
    grep -q "LOST\|overrun" $TRACE_OUT && note "trace buffer overran"
    return 0
}

# events_start EVENT...: records only these rpcrdma EVENTs, few enough
# that the I/O under them runs as it would untraced: clears the buffer and
# enables them.
events_start() {
    [ -d $TRACEFS/events ] || mount -t tracefs nodev $TRACEFS || return 1
    echo > $TRACEFS/trace || return 1
    for e in "$@"; do echo 1 > "$TRACEFS/events/rpcrdma/$e/enable" || return 1; done
    echo 1 > $TRACEFS/tracing_on
}

# events_stop FILE EVENT...: disables the EVENTs and keeps their lines in
# FILE; fails when none fired.
events_stop() {
    _f=$1; shift
    for e in "$@"; do echo 0 > "$TRACEFS/events/rpcrdma/$e/enable" || return 1; done
    grep -E " ($(echo "$*" | tr ' ' '|')): " $TRACEFS/trace > "$_f"
}

# trace_count EVENT: how many EVENT lines TRACE_OUT holds.
trace_count() { if [ -f "$TRACE_DIR/$1" ]; then wc -l < "$TRACE_DIR/$1"; else echo 0; fi; }

# trace_fired EVENT...: each EVENT fired at least once.
trace_fired() {
    for e in "$@"; do
        [ "$(trace_count "$e")" -gt 0 ] || { echo "$e never fired"; return 1; }
    done
}

# trace_sample EVENT...: the first line of each EVENT to the host log.
trace_sample() {
    for e in "$@"; do
        note "$(head -n 1 "$TRACE_DIR/$e" 2>/dev/null | sed "s/.* \($e: \)/\1/")"
    done
}

# trace_field EVENT FIELD: FIELD's values (the text after "FIELD=") in
# EVENT's lines.
trace_field() {
    [ ! -f "$TRACE_DIR/$1" ] || sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$TRACE_DIR/$1"
}

# trace_check_client: the events of a mount's I/O through rpcrdma_rs.
trace_check_client() {
    # read_back remounts: the first connection was torn down.
    trace_fired xprtrdma_connect xprtrdma_disconnect xprtrdma_op_connect xprtrdma_marshal \
        xprtrdma_post_send xprtrdma_wc_receive xprtrdma_reply xprtrdma_mr_map || return 1
    grep " xprtrdma_connect: " $TRACE_OUT | grep -q "peer=\[$SERVER4\]:$NFS_RDMA_PORT rc=0 connection status=1" ||
        { echo "no connect to $SERVER4:$NFS_RDMA_PORT: $(grep -m1 ' xprtrdma_connect: ' $TRACE_OUT)"; return 1; }
    # Backchannel Replies are posted too, by a task without a client (-1).
    b=$(grep -c "@ffffffff " "$TRACE_DIR/xprtrdma_post_send")
    m=$(trace_count xprtrdma_marshal) p=$(($(trace_count xprtrdma_post_send) - b))
    [ "$m" -eq "$p" ] || { echo "$m Calls marshalled, $p Sends posted for Calls"; return 1; }
    # Every Reply's XID is one a Call was marshalled with; the filters
    # let no zero XID through.
    trace_field xprtrdma_marshal xid | sort -u > /tmp/marshal.xids
    trace_field xprtrdma_reply xid | sort -u > /tmp/reply.xids
    [ ! -s /tmp/reply.xids ] && { echo "no Reply XID"; return 1; }
    lines_in -v /tmp/marshal.xids /tmp/reply.xids > /tmp/unmatched.xids
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
    # sunrpc's connect, at once for the mount's first.
    grep -q " xprtrdma_op_connect: peer=\[$SERVER4\]:$NFS_RDMA_PORT delay=0$" "$TRACE_DIR/xprtrdma_op_connect" ||
        { echo "no op_connect to $SERVER4:$NFS_RDMA_PORT: $(head -n 1 "$TRACE_DIR/xprtrdma_op_connect" 2>&1)"; return 1; }
    trace_sample xprtrdma_connect xprtrdma_op_connect xprtrdma_marshal xprtrdma_post_send \
        xprtrdma_wc_receive xprtrdma_reply xprtrdma_mr_map xprtrdma_disconnect
    # Session setup (NFSv4.1+): the backchannel and the lease's timeouts.
    for e in xprtrdma_cb_setup xprtrdma_op_set_cto; do
        [ "$(trace_count $e)" -eq 0 ] || trace_sample $e
    done
    note "client trace: $m Calls, $(wc -l < /tmp/reply.xids) Reply XIDs, all marshalled; $b backchannel Replies"
    trace_check_client_io && trace_check_frwr
}

# trace_check_client_io: the client's thresholds, Receives and chunks.
# 16 MiB written and read back in 1 MiB WRITEs and READs take Read and
# Write chunks; READDIRs take Reply chunks.
trace_check_client_io() {
    trace_fired xprtrdma_inline_thresh xprtrdma_post_recv xprtrdma_post_recvs \
        xprtrdma_chunk_read xprtrdma_chunk_write xprtrdma_chunk_reply xprtrdma_decode_seg || return 1
    # Once per connection established, before the connect event: our
    # address to the server's, thresholds of 1 KiB or more, each leaving
    # room for less than itself once the largest header is taken off.
    c=$(grep -c " rc=0 connection status=1$" "$TRACE_DIR/xprtrdma_connect")
    [ "$(trace_count xprtrdma_inline_thresh)" -eq "$c" ] ||
        { echo "$(trace_count xprtrdma_inline_thresh) inline_thresh for $c connects"; return 1; }
    sed 's/.* xprtrdma_inline_thresh: //' "$TRACE_DIR/xprtrdma_inline_thresh" |
        awk -v dst="$SERVER4:$NFS_RDMA_PORT" '{ split($5, n, "[=/,]"); split($7, k, "[=/,]") }
             $1 !~ /^192\.0\.2\.[0-9]+:[0-9]+$/ || $3 != dst || n[3] < 1024 || n[4] < 1024 ||
             k[3] < 1 || k[3] >= n[3] || k[4] < 1 || k[4] >= n[4] { print "inline_thresh: " $0; exit 1 }' ||
        return 1
    # Every Receive posted is numbered; each completion (the successful
    # ones pass the filter) is of a Receive posted, under its CQ and
    # number; the passes' counts add up to the Receives posted (but for
    # one pass that tracing stopped in: lease renewals go on).
    trace_pairs done xprtrdma_post_recv xprtrdma_wc_receive || return 1
    r=$(sed -n 's/.* cq\.id=[0-9]* \([0-9]*\) new recvs, \(-*[0-9]*\) active$/\1 \2/p' "$TRACE_DIR/xprtrdma_post_recvs" |
        awk '$2 < 0 { print "active=" $2; exit 1 } { n += $1; if ($1 > max) max = $1 } END { print n, max }') ||
        { echo "post_recvs: $r"; return 1; }
    set -- $r
    pr=$(trace_count xprtrdma_post_recv)
    [ "$1" -le "$pr" ] && [ "$pr" -le $(($1 + $2)) ] ||
        { echo "post_recvs count $1 new Receives, post_recv $pr"; return 1; }
    # Each chunk segment is an MR mapped for its Call (same task, length,
    # offset and handle), toward the device for a Read chunk, from it
    # for a Write or Reply chunk; each Call marshalled with a chunk had
    # its chunk's last segment encoded.
    cat "$TRACE_DIR/xprtrdma_mr_map" "$TRACE_DIR/xprtrdma_chunk_read" "$TRACE_DIR/xprtrdma_chunk_write" \
        "$TRACE_DIR/xprtrdma_chunk_reply" "$TRACE_DIR/xprtrdma_marshal" |
    awk '{ ev = ""; task = ""; seg = ""
           for (i = 1; i <= NF; i++) {
               if (ev == "" && $i ~ /^xprtrdma_[a-z_]*:$/) ev = $i
               else if ($i ~ /^task:/) task = $i
               else if ($i ~ /^[0-9]+@0x[0-9a-f]+:0x[0-9a-f]+$/) seg = $i } }
         ev == "xprtrdma_mr_map:" { dir[task " " seg] = $NF; next }
         ev == "xprtrdma_chunk_read:" || ev == "xprtrdma_chunk_write:" || ev == "xprtrdma_chunk_reply:" {
             want = ev == "xprtrdma_chunk_read:" ? "(TO_DEVICE)" : "(FROM_DEVICE)"
             if (dir[task " " seg] != want) { print ev " " task " " seg " not mapped " want; bad = 1; exit 1 }
             if ($NF == "(last)") last[ev " " task] = 1
             n[ev]++; next }
         ev == "xprtrdma_marshal:" {
             if ($0 ~ /[ *]read list\//) need["xprtrdma_chunk_read: " task] = 1
             if ($0 ~ /\/write list$/) need["xprtrdma_chunk_write: " task] = 1
             if ($0 ~ /\/reply chunk$/) need["xprtrdma_chunk_reply: " task] = 1 }
         END { if (bad) exit 1
               for (k in need) if (!(k in last)) { print "marshalled with no last segment: " k; exit 1 }
               printf "%d Read, %d Write, %d Reply chunk segments, each an MR mapped for its Call\n",
                   n["xprtrdma_chunk_read:"], n["xprtrdma_chunk_write:"], n["xprtrdma_chunk_reply:"] }' > /tmp/chunks.check ||
        { cat /tmp/chunks.check; return 1; }
    # Each segment a Reply returns is one offered (offset and handle), no
    # longer than offered.
    cat "$TRACE_DIR/xprtrdma_chunk_write" "$TRACE_DIR/xprtrdma_chunk_reply" "$TRACE_DIR/xprtrdma_chunk_wp" \
        "$TRACE_DIR/xprtrdma_decode_seg" 2>/dev/null |
    awk '{ ev = ""; seg = ""
           for (i = 1; i <= NF; i++) {
               if (ev == "" && $i ~ /^xprtrdma_[a-z_]*:$/) ev = $i
               else if ($i ~ /^[0-9]+@0x[0-9a-f]+:0x[0-9a-f]+$/) seg = $i }
           split(seg, a, "@"); len = a[1] + 0; key = a[2] }
         ev != "xprtrdma_decode_seg:" { if (len > off[key]) off[key] = len; next }
         ev == "xprtrdma_decode_seg:" {
             if (!(key in off) || len > off[key]) { print "decode_seg " seg " never offered as long"; bad = 1; exit 1 }
             nd++ }
         END { if (bad) exit 1; printf "%d returned segments, each offered\n", nd }' > /tmp/decode.check ||
        { cat /tmp/decode.check; return 1; }
    # Nothing failed to post.
    for e in xprtrdma_post_send_err xprtrdma_post_recvs_err; do
        [ "$(trace_count $e)" -eq 0 ] || { echo "$(head -n 1 "$TRACE_DIR/$e")"; return 1; }
    done
    # No Send buffer free: rpcrdma.ko's -EAGAIN, and sunrpc tries again.
    [ "$(trace_count xprtrdma_prepsend_failed)" -eq 0 ] || {
        trace_field xprtrdma_prepsend_failed ret | awk '$1 != -11 { print "prepsend_failed ret=" $1; exit 1 }' || return 1
        trace_sample xprtrdma_prepsend_failed; }
    trace_sample xprtrdma_inline_thresh xprtrdma_post_recv xprtrdma_post_recvs xprtrdma_chunk_read \
        xprtrdma_chunk_write xprtrdma_chunk_reply xprtrdma_decode_seg
    for e in xprtrdma_chunk_wp xprtrdma_fixup; do
        [ "$(trace_count $e)" -eq 0 ] || trace_sample $e
    done
    note "client I/O: $c connects; $(trace_count xprtrdma_post_recv) Receives posted in $(trace_count xprtrdma_post_recvs) passes; $(cat /tmp/chunks.check); $(cat /tmp/decode.check); $(trace_count xprtrdma_prepsend_failed) Calls without a Send buffer"
}

# trace_check_frwr: the client's MRs and Send completions. 1 MiB READs
# and WRITEs take several MRs each (rxe: 32 pages an MR), which the
# client invalidates with LOCAL_INV; a READDIR's Reply chunk takes one,
# which the server invalidates with Send With Invalidate.
trace_check_frwr() {
    trace_fired xprtrdma_mr_fastreg xprtrdma_mr_localinv xprtrdma_mr_reminv xprtrdma_mr_unmap \
        xprtrdma_wc_li_done xprtrdma_wc_send || return 1
    # Every MR registered for a Call was mapped for it first, and is
    # invalidated (locally or remotely) under the id and handle it was
    # registered with, then unmapped; every LOCAL_INV chain's completion
    # names an MR invalidated so. The Write chunk pad (task 0@-1) lives
    # as long as its connection.
    grep -E " xprtrdma_(mr_map|mr_fastreg|mr_localinv|mr_reminv|wc_li_done|mr_unmap): " $TRACE_OUT |
    awk '{ ev = ""; task = ""; id = ""; h = ""; len = -1; nents = -1; st = ""
           for (i = 1; i <= NF; i++) {
               if (ev == "" && $i ~ /^xprtrdma_[a-z_]*:$/) ev = $i
               else if ($i ~ /^task:/) task = $i
               else if ($i ~ /^mr\.id=/) id = substr($i, 7)
               else if ($i ~ /^nents=/) nents = substr($i, 7) + 0
               else if ($i ~ /^status=/) st = substr($i, 8)
               else if ($i ~ /^[0-9]+@0x[0-9a-f]+:0x[0-9a-f]+$/) {
                   split($i, a, "@"); len = a[1] + 0; n = split($i, b, ":"); h = b[n] } }
           key = id " " h }
         ev == "" { next }
         ev == "xprtrdma_mr_map:" { mapped[key] = 1 }
         ev == "xprtrdma_mr_fastreg:" {
             if (nents < 1 || len < 1 || len > 1048576 || $NF !~ /^\((TO|FROM)_DEVICE\)$/) {
                 print "fastreg: " $0; exit 1 }
             if (task == "task:00000000@ffffffff") { pad++; next }
             if (!(key in mapped)) { print "fastreg of an MR never mapped: " key; exit 1 }
             reg[key]++; nreg++ }
         ev == "xprtrdma_mr_localinv:" || ev == "xprtrdma_mr_reminv:" {
             if (reg[key] < 1) { print ev " of an MR not registered: " key; exit 1 }
             reg[key]--; inv[key]++
             if (ev == "xprtrdma_mr_localinv:") { li[id] = 1; nli++ } else nri++ }
         ev == "xprtrdma_wc_li_done:" {
             if (!(id in li)) { print "wc_li_done of mr.id=" id ", never LOCAL_INVed"; exit 1 }
             if (st != "SUCCESS" && st != "WR_FLUSH_ERR") { print "wc_li_done: " $0; exit 1 }
             nlid++ }
         ev == "xprtrdma_mr_unmap:" && inv[key] > 0 { inv[key]--; nun++ }
         END { for (k in reg) if (reg[k]) { print "MR " k " registered, never invalidated"; exit 1 }
               for (k in inv) if (inv[k]) { print "MR " k " invalidated, never unmapped"; exit 1 }
               printf "%d MRs registered for Calls, %d LOCAL_INV (%d chains), %d remotely invalidated, %d unmapped, %d Write pads\n",
                   nreg, nli, nlid, nri, nun, pad }' > /tmp/frwr.check ||
        { cat /tmp/frwr.check; return 1; }
    # Sends complete in order, so a Send completion comes after those of
    # every signalled Send posted before it on its connection: each of
    # those completed, with its post's cq.id and cid, successfully or
    # flushed as its connection went. xprtrdma_post_send fires before the
    # post, as rpcrdma.ko's: a completion follows its post in the trace.
    # (A Reply may complete its RPC before its Call's Send completion is
    # handled, so the last Sends' completions may come after tracing
    # stopped.)
    grep -E " xprtrdma_(post_send|wc_send): " $TRACE_OUT |
    awk '{ ev = ""; q = ""; c = ""; st = ""
           for (i = 1; i <= NF; i++) {
               if (ev == "" && $i ~ /^xprtrdma_[a-z_]*:$/) ev = $i
               else if ($i ~ /^cq\.id=/) q = substr($i, 7)
               else if ($i ~ /^cid=/) c = substr($i, 5) + 0
               else if ($i ~ /^status=/) st = substr($i, 8) } }
         ev == "xprtrdma_post_send:" { posted[q " " c] = 1; if ($NF == "signaled") { sig[q " " c] = 1; ns++ } }
         ev == "xprtrdma_wc_send:" {
             if (st != "SUCCESS" && st != "WR_FLUSH_ERR") { print "wc_send: " $0; bad = 1; exit 1 }
             if (!((q " " c) in posted)) { print "wc_send cq.id=" q " cid=" c " before its post_send"; bad = 1; exit 1 }
             if (c > done[q]) done[q] = c
             comp[q " " c] = 1; nw++ }
         END { if (bad) exit 1
               for (k in sig) { if (k in comp) continue
                   split(k, a, " ")
                   if (a[2] + 0 < done[a[1]]) { print "signalled Send cq.id=" a[1] " cid=" a[2] " never completed, cid=" done[a[1]] " did"; exit 1 }
                   pend++ }
               printf "%d signalled Sends, %d Send completions, %d still to come as tracing stopped\n", ns, nw, pend }' > /tmp/send.check ||
        { cat /tmp/send.check; return 1; }
    # Nothing failed: the events of failures fired not at all, or for
    # work flushed as a connection went.
    for e in xprtrdma_frwr_alloc xprtrdma_frwr_dereg xprtrdma_frwr_sgerr xprtrdma_frwr_maperr; do
        [ "$(trace_count $e)" -eq 0 ] || { echo "$(grep -m1 " $e: " $TRACE_OUT)"; return 1; }
    done
    ! grep -E " xprtrdma_wc_(fastreg|li): " $TRACE_OUT | grep -v -m1 "status=WR_FLUSH_ERR " ||
        { echo "a failed REG_MR or LOCAL_INV"; return 1; }
    trace_sample xprtrdma_mr_fastreg xprtrdma_mr_localinv xprtrdma_wc_li_done xprtrdma_mr_reminv \
        xprtrdma_mr_unmap xprtrdma_wc_send
    note "client FRWR: $(cat /tmp/frwr.check); $(cat /tmp/send.check)"
}

# trace_pairs MODE A B: A and B lines (B an event or several, "e1|e2")
# matched on their cq.id and cid, in recording order. MODE "done": each B
# closes an earlier A (a completion of what was posted); "all": that, and
# no A is left open; "then": each A is followed by a B (which closes every
# A before it). grep picks the lines first: awk's walk over every field
# of every line took minutes on a big trace under TCG.
trace_pairs() {
    grep -E " ($2|$3): " $TRACE_OUT | awk -v mode="$1" -v a="$2:" -v b="^($3):\$" '
        { ev = ""; key = ""
          for (i = 1; i <= NF; i++) {
              if (ev == "" && $i ~ /^(svc|xprt)rdma_[a-z_]*:$/) ev = $i
              else if (ev != "" && $i ~ /^(cq\.id|cid)=/) key = key " " $i
          } }
        ev == a { open[key]++; na++ }
        ev ~ b && mode == "then" { open[key] = 0; nb++ }
        ev ~ b && mode != "then" {
            if (open[key] < 1) { print ev " with no " a key; bad = 1; exit 1 }
            open[key]--; nb++ }
        END { if (bad) exit 1
              if (mode != "done") for (k in open) if (open[k]) { print a k " never followed by " b; exit 1 } }
    '
}

# trace_check_server: the events of nfsd's Calls through rpcrdma_rs.
trace_check_server() {
    trace_fired svcrdma_wc_recv svcrdma_decode_rqst svcrdma_post_send svcrdma_wc_send || return 1
    # Every Call decoded is of a version we speak: 1, or 2 (issue 29),
    # which our client settles on with us (matrix.sh checks it there).
    trace_field svcrdma_decode_rqst vers | awk '$1 != 1 && $1 != 2 { print "vers=" $1; exit 1 }' || return 1
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
    # Receives reposted; WRITEs pulled with RDMA Reads, READs pushed with
    # RDMA Writes (and with RR_TRACE=chunks, long Replies in Reply chunks).
    trace_fired svcrdma_post_recv svcrdma_post_read_chunk svcrdma_wc_read \
        svcrdma_post_write_chunk svcrdma_wc_write || return 1
    if [ "$RR_TRACE" = chunks ]; then
        trace_fired svcrdma_post_reply_chunk svcrdma_wc_reply || return 1
    fi
    # Every Read posted completed (or was flushed as its connection went),
    # with its cq.id and cid. A Reply's Writes go with its Send (same
    # cq.id and cid) and complete with it: every svcrdma_wc_write or
    # _reply is of Writes posted. (A Send left unsignalled when its
    # connection goes has no completion to report.)
    trace_pairs all svcrdma_post_read_chunk 'svcrdma_wc_read|svcrdma_wc_read_flush' &&
        trace_pairs then svcrdma_post_write_chunk svcrdma_post_send &&
        trace_pairs done svcrdma_post_write_chunk 'svcrdma_wc_write|svcrdma_wc_write_flush' &&
        trace_pairs then svcrdma_post_reply_chunk svcrdma_post_send &&
        trace_pairs done svcrdma_post_reply_chunk 'svcrdma_wc_reply|svcrdma_wc_reply_flush' || return 1
    for e in svcrdma_post_read_chunk svcrdma_post_write_chunk svcrdma_post_reply_chunk; do
        trace_field $e sqecount | awk -v e=$e '$1 < 1 { print e " sqecount=" $1; exit 1 }' || return 1
    done
    trace_field svcrdma_wc_read totalbytes | awk '$1 < 1 { print "totalbytes=" $1; exit 1 }' || return 1
    trace_field svcrdma_wc_read latency-us | awk '$1 < 0 { print "latency-us=" $1; exit 1 }' || return 1
    # The chunk lists as decoded and echoed: every Write list segment a
    # Reply echoes is one a Call offered (same offset and handle),
    # written no longer than offered.
    trace_fired svcrdma_decode_rseg svcrdma_decode_wseg svcrdma_encode_wseg || return 1
    trace_field svcrdma_decode_rseg position | awk '$1 !~ /^[0-9]+$/ { print "position=" $1; exit 1 }' || return 1
    grep -E " svcrdma_(de|en)code_wseg: " $TRACE_OUT |
        awk '{ ev = ""; for (i = 1; i <= NF; i++) if ($i ~ /^svcrdma_(de|en)code_wseg:$/) ev = $i
               if (ev == "") next
               split($NF, a, "@"); key = a[2]; len = a[1] + 0 }
             ev == "svcrdma_decode_wseg:" && len > off[key] { off[key] = len }
             ev == "svcrdma_encode_wseg:" && (!(key in off) || len > off[key]) {
                 print "echoed " $NF " never offered as long"; exit 1 }' || return 1
    # Nothing failed; completions flushed as connections went, if any,
    # say so.
    for e in svcrdma_wc_send_err svcrdma_wc_recv_err svcrdma_wc_read_err svcrdma_wc_write_err \
        svcrdma_wc_reply_err svcrdma_sq_post_err svcrdma_send_err svcrdma_rq_post_err \
        svcrdma_qp_err svcrdma_initdepth_err svcrdma_accept_err svcrdma_pd_err \
        svcrdma_small_wrch_err; do
        [ "$(trace_count $e)" -eq 0 ] || { echo "$(grep -m1 " $e: " $TRACE_OUT)"; return 1; }
    done
    ! grep " svcrdma_wc_[a-z]*_flush: " $TRACE_OUT | grep -v -m1 "status=WR_FLUSH_ERR " ||
        { echo "a flush event without WR_FLUSH_ERR"; return 1; }
    trace_sample svcrdma_post_recv svcrdma_decode_rseg svcrdma_decode_wseg svcrdma_post_read_chunk \
        svcrdma_wc_read svcrdma_post_write_chunk svcrdma_encode_wseg svcrdma_wc_write
    [ "$RR_TRACE" != chunks ] || trace_sample svcrdma_post_reply_chunk svcrdma_wc_reply
    note "server chunks: $(trace_count svcrdma_post_read_chunk) Read posts, $(trace_count svcrdma_post_write_chunk) Write chunks ($(trace_count svcrdma_wc_write) completed), $(trace_count svcrdma_post_reply_chunk) Reply chunks ($(trace_count svcrdma_wc_reply) completed), $(trace_count svcrdma_sq_full) Send Queue waits"
}

# rdma_counts: the RDMA resources held, by kind ("rdma resource show").
rdma_counts() { rdma resource show | sed 's/^[0-9]*: //'; }

# shrink_slabs: every slab cache shrunk. Freed objects wait in per-CPU
# sheaves and the node's barn, and under KASAN in its quarantine, still
# counted as in use (slabinfo, SUnreclaim) until their cache is shrunk.
shrink_slabs() {
    for f in /sys/kernel/slab/*/shrink; do echo 1 > "$f"; done 2>/dev/null
}

# counts_snapshot: with the caches dropped, the RDMA resource counts,
# MemFree (kB), and the objects in use in each kmalloc cache (what
# server.sh counts_req and the soak's memory figures compare).
counts_snapshot() {
    sync && echo 3 > /proc/sys/vm/drop_caches
    # Without this a burst of connections leaves a few hundred free
    # objects that look kept.
    shrink_slabs
    echo "rdma $(rdma_counts | tr -s ' \n' '__')"
    awk '$1 == "MemFree:" { print "memfree", $2 }' /proc/meminfo
    awk '$1 ~ /^(dma-)?kmalloc-/ { print "slab", $1, $2 }' /proc/slabinfo
}

# mem_growth BASE NOW: from two counts_snapshot files, the three kmalloc
# caches that grew most (cache:+objects, most first) and how far MemFree
# went down (kB).
mem_growth() {
    awk 'FNR == NR { if ($1 == "memfree") bf = $2; else if ($1 == "slab") bs[$2] = $3; next }
         $1 == "memfree" { nf = $2 }
         $1 == "slab" { d[$2] = $3 - bs[$2] }
         END {
             for (k = 1; k <= 3; k++) {
                 m = ""
                 for (c in d) if (!(c in seen) && (m == "" || d[c] > d[m])) m = c
                 if (m == "") break
                 seen[m] = 1; top = top (k > 1 ? "," : "") sprintf("%s:%+d", m, d[m])
             }
             printf "slab_most=%s memfree_down_kb=%d\n", top, bf - nf }' "$1" "$2"
}

# rdma_back BASE SECS: the RDMA resource counts back to BASE, SECS s at
# most (a disconnected connection's CM id lingers until its DREQ is
# answered); else says what is held.
rdma_back() {
    _i=0
    until [ "$(rdma_counts)" = "$1" ]; do
        _i=$((_i + 1))
        [ $_i -le "$2" ] ||
            { echo "RDMA resources before: $1; now: $(rdma_counts); $(rdma resource show cm_id)" | tr '\n' ' '; return 1; }
        sleep 1
    done
}

# stuck_log: the client's side of a mount that did not come back: its
# transport's connect count, IB CM counters, RDMA connections and QPs
# (the GSI QP that carries the CM's messages among them), neighbours, and
# where blocked tasks are.
stuck_log() {
    echo "== client stuck at $(cut -d' ' -f1 /proc/uptime)"
    grep "xprt:" /proc/self/mountstats
    cm_counters
    rdma resource show cm_id
    rdma resource show qp
    rdma statistic show link "$RDMA_DEV/1"
    $IP neigh show dev eth0
    blocked_log
}

# Allocation failures (scripts/alloc-faults.sh, the kasan kernel's
# failslab and fail_page_alloc): /scenario/alloc-sites.txt lists, as
# "INDEX SYMBOL", the module's functions that allocate (directly, or
# through the C call that allocates for them). Arming INDEX fails the next
# slab and the next page allocation made with that function on the stack
# (the stack-trace filter, bounded by the function's text in kallsyms),
# once each.
FI_DIR=/sys/kernel/debug
FI_ATTRS="failslab fail_page_alloc"
AF_SITES=/scenario/alloc-sites.txt

# fi_setup: every kind of allocation may fail (GFP_KERNEL, order 0 and
# highmem too), each failure's stack goes to the kernel log, nothing is
# armed yet.
fi_setup() {
    for a in $FI_ATTRS; do
        d=$FI_DIR/$a
        [ -d $d ] || { echo "no $d: not the kasan kernel?"; return 1; }
        echo 0 > $d/probability && echo 0 > $d/times && echo 1 > $d/interval &&
            echo 0 > $d/space && echo N > $d/task-filter && echo N > $d/ignore-gfp-wait &&
            echo 32 > $d/stacktrace-depth && echo 2 > $d/verbose || return 1
    done
    echo N > $FI_DIR/failslab/cache-filter && echo 0 > $FI_DIR/fail_page_alloc/min-order &&
        echo N > $FI_DIR/fail_page_alloc/ignore-gfp-highmem
}

# fi_range INDEX: "START END" of site INDEX's function in this kernel, from
# kallsyms (its address up to the next symbol's); nothing if not loaded.
fi_range() {
    sym=$(awk -v i="$1" '$1 == i { print $2; exit }' $AF_SITES)
    [ -n "$sym" ] || return 1
    # shellcheck disable=SC2016 # awk's own $
    awk '$4 == "[rpcrdma_rs]" { print $1, $3 }' /proc/kallsyms | sort |
        awk -v s="$sym" 'found { print "0x" start, "0x" $1; exit } $2 == s { found = 1; start = $1 }'
}

# fi_arm INDEX: the next slab and page allocation with site INDEX on the
# stack fail, once each.
fi_arm() {
    set -- $(fi_range "$1")
    [ $# -eq 2 ] || { echo "site not in kallsyms"; return 1; }
    for a in $FI_ATTRS; do
        d=$FI_DIR/$a
        # debugfs reads 0x numbers (kstrtoull base 0); ash's arithmetic
        # would take them as signed.
        echo "$1" > $d/require-start && echo "$2" > $d/require-end &&
            echo 1 > $d/times && echo 100 > $d/probability || return 1
    done
    echo "af-armed" > /dev/kmsg
}

# fi_disarm: stop failing; prints what was failed since fi_arm ("slab",
# "page", both, or nothing).
fi_disarm() {
    hit=
    for a in $FI_ATTRS; do
        echo 0 > $FI_DIR/$a/probability
        [ "$(cat $FI_DIR/$a/times)" != 0 ] || case $a in failslab) hit="$hit slab" ;; *) hit="$hit page" ;; esac
        echo 0 > $FI_DIR/$a/times
    done
    echo $hit
}

# fi_report: disarms, and says what failed since fi_arm as "HIT|WHERE|BAD"
# (fi_disarm, fi_where, fi_log_bad; HIT "-" for nothing), on one line.
fi_report() {
    _hit=$(fi_disarm)
    echo "${_hit:--}|$(fi_where)|$(fi_log_bad | tr '\n|' '  ')"
}

# fi_log: the kernel log since the last fi_arm.
fi_log() {
    dmesg | awk '/af-armed/ { n = NR } { l[NR] = $0 } END { for (i = n; i <= NR; i++) print l[i] }'
}

# fi_log_bad: the kernel log since the last fi_arm, without the stacks the
# injections dumped: any oops, WARN, KASAN or lockdep report there.
fi_log_bad() {
    fi_log | fi_strip | grep -aE "$GUEST_BAD_LOG" | head -n 2
}

# fi_strip: a kernel log without the reports of injected failures.
fi_strip() { awk -f /scenario/fi-strip.awk; }

# fi_where: where the last injected failure hit, from its stack: the
# module's innermost function and what it called ("callee < function").
fi_where() {
    fi_log |
        awk '/FAULT_INJECTION: forcing a failure/ { on = 1; frames = 0; prev = ""; next }
             on && /Call Trace:/ { frames = 1; next }
             !frames { next }
             { sub(/^\[[^]]*\] */, "") }
             /^(<|\? )/ { next }
             { f = $1; sub(/\+0x.*/, "", f) }
             / \[rpcrdma_rs\]$/ { print prev " < " f; exit }
             { prev = f }'
}

# The host's BAD_LOG (scripts/vm.sh vm_prepare), for the guest's own checks.
GUEST_BAD_LOG=$(cat /scenario/bad-log.re 2>/dev/null)

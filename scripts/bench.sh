#!/usr/bin/env bash
# NFS-over-RDMA benchmark (a measurement, not a test), in two dimensions:
#   client: the client on rpcrdma.ko, then on rpcrdma_rs.ko, against the
#           same C server (rpcrdma.ko in the server VM);
#   server: the same C client (rpcrdma.ko) against nfsd on rpcrdma.ko, then
#           on rpcrdma_rs.ko (the server VM loads its transport per rr.mod).
# In each of REPS rounds, each dimension boots the VM pair once per module
# (alternating, C first in odd rounds and last in even ones, so that load
# on the host and the order hit both alike) and runs the same
# fio workloads on the client's
# NFSv4.2 mount (rsize/wsize 1 MiB asked for): sequential 1 MiB write and
# read (libaio, direct, iodepth 4), 4 KiB random read at iodepth 1 and 16,
# and metadata (fio's filecreate, filestat and filedelete engines on MDFILES
# files, on a second mount with actimeo=0: see tests/vm/bench.sh). Prints
# one table per dimension ("client: rpcrdma.ko vs rpcrdma_rs", "server:
# ..."): per workload and module, the median over the rounds and the
# min-max range, the ratio of the medians rs/C, "within noise" where the two
# ranges overlap, and draws the medians with min-max error bars as a PNG.
#
#   BENCH_DIMS="client server"   which dimensions to run (or, with REPORT,
#                 to print); one of them alone halves the boots. A third,
#                 "version" (not run by default), has rpcrdma_rs on both
#                 ends speak RPC-over-RDMA version 1 (the client's
#                 max_version=1) against version 2, on the metadata and
#                 4 KiB jobs only (VERSION_JOBS), and counts the Long
#                 Calls and Reply chunks each needed from the client's
#                 mountstats: where version 2's 4096-byte default threshold
#                 keeps messages inline that version 1's 1024 would not
#   REPS=3        rounds (one boot per module per dimension per round)
#   RUNTIME=10    seconds per time-based fio job (plus 2 s ramp)
#   VERS=4.2      the NFS version mounted (4.2, 4.1 or 3; 3 has no callbacks,
#                 so a server without a backchannel is measured without
#                 the client's reaction to a callback path that is down)
#   SIZE=64       MiB in the data file
#   MDFILES=1000  files the metadata jobs create, stat and delete (create
#                 and delete are not time-based: at ~200 files/s under TCG,
#                 200 files took one second, too short a window for a
#                 stable rate or a CPU sample)
#   CLIENTS="c rs"   which client modules the client dimension runs
#   SERVERS="c rs"   which server modules the server dimension runs
#   LINK=unix     the guests' link: unix (QEMU stream netdev over a unix
#                 socket) or tcp (the tests' socket netdev; its Nagle stalls
#                 cap every synchronous RPC at ~48 ms: see scripts/vm.sh)
#   CLOCK=icount  the guests' clock: icount (QEMU -icount shift=2,sleep=on:
#                 while a guest computes, its clock advances 4 ns per
#                 instruction it executes, whatever the host's speed; while
#                 it idles, as the host's clock does) or host (the guests
#                 run as fast as the host lets them, and a round's rate
#                 moves by up to twice with the host's load, more than the
#                 two modules differ: see the README)
#   KERNEL=bench  the guests' kernel: bench (the test kernel without lockdep,
#                 lock and list debugging and KFENCE, which tax each client by
#                 its lock and allocation count rather than its speed) or test
#   JOBS="..."    only these fio jobs (names as in tests/vm/bench.sh; md_stat
#                 and md_delete need md_create's files)
#   PROFILE="..." jobs (or "all") to run under a cpu-clock perf profile of
#                 both guests (the report's top functions go to
#                 perf-$mod-r$N/); profiling slows the guests, so a profiled
#                 round's numbers are not for the table
#   PROFILER=perf  with PROFILE, what profiles: perf (cpu-clock samples of
#                 both guests) or funcs (the server's kernel functions
#                 counted by ftrace's function profiler, with the RPCs it
#                 served, in perf-server.txt: exact calls per RPC, to set
#                 the two servers side by side; the guest runs several
#                 times slower meanwhile), or insns (the client's kernel
#                 instructions per RPC, counted exactly by a QEMU plugin,
#                 tools/qemu-insns, over the job's window, by function:
#                 the transport module's own Rust included, which ftrace
#                 and perf's few samples do not resolve; insns-client-JOB.txt
#                 sets both clients side by side; client dimension only)
#   REPORT=out/bench-...   no VMs: print the table and chart of that run again
#
# Each job also records the client's CPU time (user, sys, softirq, idle);
# the client table shows how busy the client's one vCPU was and its CPU per
# operation. In the server dimension the server samples its own CPU time
# around each job too (rr.srvcpu=on: a trigger file in the export, see
# server_cpu in tests/vm/bench.sh and cpu_watch in tests/vm/server.sh), and
# the server table shows the server's vCPU instead.
#
# Per round the fio JSON is in fio-$mod-r$N/ (client dimension) or
# fio-srv-$mod-r$N/ (server dimension), plus mount.txt, the client's
# /proc/self/mountstats and the CPU samples (JOB.cpu: client, JOB.scpu:
# server); the VM logs in bench-$mod-r$N/ or bench-srv-$mod-r$N/.
#
# Under QEMU TCG the absolute numbers say little about real hardware; the
# ratio between the two modules on the same machine is the point.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

REPS=${REPS:-3} RUNTIME=${RUNTIME:-10} SIZE=${SIZE:-64} MDFILES=${MDFILES:-1000} CLIENTS=${CLIENTS:-c rs} SERVERS=${SERVERS:-c rs}
BENCH_DIMS=${BENCH_DIMS:-client server}
VERSION_JOBS=${VERSION_JOBS:-rand_read_4k_qd1 rand_read_4k_qd16 md_create md_stat md_delete}
VERS=${VERS:-4.2} REPORT=${REPORT:-} VM_LINK=${LINK:-unix} KERNEL=${KERNEL:-bench} JOBS=${JOBS:-} PROFILE=${PROFILE:-}
PROFILER=${PROFILER:-perf}
case $PROFILER in perf | funcs | insns) ;; *) die "PROFILER=$PROFILER: perf, funcs or insns" ;; esac
CLOCK=${CLOCK:-icount}
T_PASS=0 T_FAIL=0
RUN_DIR=${REPORT:-$REPO_DIR/out/bench-$(date +%Y%m%d-%H%M%S)}
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "REPS=$REPS: a positive number"
[[ $MDFILES =~ ^[1-9][0-9]*$ ]] || die "MDFILES=$MDFILES: a positive number"
for dim in $BENCH_DIMS; do
    case $dim in client | server | version) ;; *) die "BENCH_DIMS=$BENCH_DIMS: client, server and/or version" ;; esac
done
[ -n "${BENCH_DIMS// /}" ] || die "BENCH_DIMS is empty: client and/or server"
[ -z "$REPORT" ] || [ -d "$REPORT" ] || die "REPORT=$REPORT: no such directory"
case $CLOCK in icount | host) ;; *) die "CLOCK=$CLOCK: icount or host" ;; esac
# icount is TCG's; under KVM the guests run at the host's own speed.
[ "$VM_ACCEL" = tcg ] || CLOCK=host
VM_QEMU_ARGS=; [ "$CLOCK" = host ] || VM_QEMU_ARGS="-icount shift=2,sleep=on"
mkdir -p "$RUN_DIR"
# An older run's report: the file count it ran with (200 before MDFILES).
if [ -n "$REPORT" ]; then MDFILES=$(cat "$RUN_DIR/mdfiles.txt" 2>/dev/null || echo 200); fi

# The host side needs jq for fio's JSON and gnuplot for the chart.
need=()
command -v jq >/dev/null || need+=(jq)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
[ -z "$PROFILE" ] || [ "$PROFILER" != insns ] || command -v gcc >/dev/null || need+=(gcc)
[ -z "$PROFILE" ] || [ "$PROFILER" != perf ] || command -v perf >/dev/null || need+=(linux-perf)
if ((${#need[@]})); then
    step "apt: installing ${need[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# workload|fio job|what to show
WORKLOADS=(
    "seq write 1 MiB qd4|seq_write_1m|write MB/s"
    "seq read 1 MiB qd4|seq_read_1m|read MB/s"
    "rand read 4 KiB qd1|rand_read_4k_qd1|read IOPS"
    "rand read 4 KiB qd16|rand_read_4k_qd16|read IOPS"
    "create $MDFILES files|md_create|read IOPS"
    "stat files|md_stat|read IOPS"
    "delete $MDFILES files|md_delete|read IOPS"
)

# fio_value DIR JOB DIRECTION METRIC: one number from that job's JSON.
fio_value() {
    local json=$1/$2.json
    [ -s "$json" ] || { echo -; return; }
    case $4 in
    MB/s) jq -r ".jobs[0].$3.bw_bytes / 1e6" "$json" | awk '{ printf "%.1f\n", $1 }' ;;
    IOPS) jq -r ".jobs[0].$3.iops" "$json" | awk '{ printf "%.0f\n", $1 }' ;;
    esac
}

# The boots: round by round, each client once per round.
if [ -z "$REPORT" ]; then
    t_start=$SECONDS
    kbuild=$(KERNEL_VARIANT=$KERNEL "$REPO_DIR/scripts/kernel-build.sh")
    rs_ko=$(KDIR=$kbuild "$REPO_DIR/scripts/build-module.sh")
    # perf's binary, not Debian's wrapper script (which picks a perf_X.Y
    # by the running kernel's version).
    VM_EXTRA_BINS=
    if [ -n "$PROFILE" ] && [ "$PROFILER" = perf ]; then
        VM_EXTRA_BINS=$(command -v perf)
        [ "$(head -c 4 "$VM_EXTRA_BINS" | tr -d '\177')" = ELF ] ||
            VM_EXTRA_BINS=$(ls /usr/bin/perf_[0-9]* | sort -V | tail -n 1)
    fi
    vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
    clock_args=$VM_QEMU_ARGS
    if [ -n "$PROFILE" ] && [ "$PROFILER" = insns ]; then
        gcc -O2 -Wall -shared -fPIC -o "$RUN_DIR/insns.so" "$REPO_DIR/tools/qemu-insns/insns.c" -lpthread ||
            die "could not build the QEMU plugin"
        cp "$kbuild/System.map" "$RUN_DIR/System.map"
        cp "$rs_ko" "$RUN_DIR/rpcrdma_rs.ko"
        cp "$kbuild/net/sunrpc/xprtrdma/rpcrdma.ko" "$RUN_DIR/rpcrdma.ko"
    fi
    echo "$RUNTIME" > "$RUN_DIR/runtime.txt"
    echo "$VM_LINK" > "$RUN_DIR/link.txt"
    echo "$KERNEL" > "$RUN_DIR/kernel.txt"
    echo "$CLOCK" > "$RUN_DIR/clock.txt"
    echo "$VERS" > "$RUN_DIR/vers.txt"
    echo "$MDFILES" > "$RUN_DIR/mdfiles.txt"
    words="rr.runtime=$RUNTIME rr.size=$SIZE rr.mdfiles=$MDFILES"
    [ -z "$JOBS" ] || words="$words rr.jobs=${JOBS// /,}"
    [ -z "$PROFILE" ] || words="$words rr.profile=${PROFILE// /,} rr.profiler=$PROFILER"
    for ((round = 1; round <= REPS; round++)); do
        for dim in $BENCH_DIMS; do
            case $dim in
            client) mods=$CLIENTS pfx= ;;
            server) mods=$SERVERS pfx=srv- ;;
            version) mods="v1 v2" pfx=ver- ;;
            esac
            # Even rounds boot the modules in the reverse order, so that
            # neither always runs first after the other's boot.
            ((round % 2)) || mods=$(printf '%s\n' $mods | tac | paste -sd ' ' -)
            for mod in $mods; do
                if [ "$dim" = version ]; then
                    # rpcrdma_rs on both ends; version 1 by the client's
                    # max_version, the server unchanged.
                    what="RPC-over-RDMA $mod, rs client and server"
                    # shellcheck disable=SC2086 # one job a word
                    vwords="rr.runtime=$RUNTIME rr.size=$SIZE rr.mdfiles=$MDFILES rr.jobs=$(echo ${JOBS:-$VERSION_JOBS} | tr ' ' ,)"
                    [ -z "$PROFILE" ] || vwords="$vwords rr.profile=${PROFILE// /,} rr.profiler=$PROFILER"
                    [ "$mod" = v2 ] || vwords="$vwords rr.modparams=max_version=1"
                    swords="rr.mod=rs rr.maxblksize=1048576${PROFILE:+ rr.profile=on rr.profiler=$PROFILER}"
                    cwords="rr.script=bench rr.mod=rs rr.proto=rdma rr.vers=$VERS $vwords"
                elif [ "$dim" = client ]; then
                    what="client $mod, C server"
                    swords="rr.mod=c rr.maxblksize=1048576${PROFILE:+ rr.profile=on rr.profiler=$PROFILER}"
                    cwords="rr.script=bench rr.mod=$mod rr.proto=rdma rr.vers=$VERS $words"
                else
                    # The server samples its CPU around each job (rr.srvcpu).
                    what="server $mod, C client"
                    swords="rr.mod=$mod rr.maxblksize=1048576 rr.srvcpu=on${PROFILE:+ rr.profile=on rr.profiler=$PROFILER}"
                    cwords="rr.script=bench rr.mod=c rr.proto=rdma rr.vers=$VERS rr.srvcpu=on $words"
                fi
                step "bench: round $round/$REPS, $what (fio ${RUNTIME} s per timed job, $VM_LINK link)"
                t0=$SECONDS
                out=$RUN_DIR/fio-$pfx$mod-r$round
                mkdir -p "$out"
                VM_QEMU_ARGS=$clock_args
                [ ! -e "$RUN_DIR/insns.so" ] || VM_QEMU_ARGS="$VM_QEMU_ARGS -plugin $RUN_DIR/insns.so,dir=$out"
                run_pair "bench-$pfx$mod-r$round" 1500 "$swords" "$cwords"
                echo "  bench-$pfx$mod-r$round: $((SECONDS - t0)) s"
                # Split the results port into one JSON file per job.
                tr -d '\r' < "$VM_DIR/client.results.log" | awk -v dir="$out" '
                    /^RR-FIO-BEGIN / { f = dir "/" $2 ".json"; next }
                    /^RR-FIO-END /   { close(f); f = ""; next }
                    /^RR-STATS-BEGIN/ { f = dir "/mountstats.txt"; next }
                    /^RR-STATS-END/  { close(f); f = ""; next }
                    /^RR-CPU /       { print $3, $4, $5, $6, $7 > (dir "/" $2 ".cpu"); close(dir "/" $2 ".cpu"); next }
                    /^RR-PERF-BEGIN / { f = dir "/perf-" $2 "-" $3 ".txt"; next }
                    /^RR-PERF-END/   { close(f); f = ""; next }
                    /^RR-INSNS-RPCS / { print "rpcs", $2, $3 > (dir "/insns-meta.txt"); next }
                    /^RR-INSNS-SECT / { print "sect", $2, $3, $4, $5 > (dir "/insns-meta.txt"); next }
                    f != ""          { print > f }'
                tr -d '\r' < "$VM_DIR/server.results.log" | awk -v dir="$out" -v f="$out/perf-server.txt" '
                    /^RR-SCPU / { print $3, $4, $5, $6, $7 > (dir "/" $2 ".scpu"); close(dir "/" $2 ".scpu"); next }
                    /^RR-SSCHED / { print $3, $4, $5, $6 > (dir "/" $2 ".ssched"); close(dir "/" $2 ".ssched"); next }
                    /^RR-PERF-BEGIN/ { on = 1; next } /^RR-PERF-END/ { on = 0; next } on { print > f }'
                tr -d '\r' < "$VM_DIR/client.results.log" | sed -n 's/^RR-MOUNT //p' > "$out/mount.txt"
                tr -d '\r' < "$VM_DIR/client.results.log" | sed -n 's/^RR-MDMOUNT //p' > "$out/md-mount.txt"
                tr -d '\r' < "$VM_DIR/client.results.log" | sed -n 's/^RR-RDMAVERS //p' > "$out/rdma-version.txt"
            done
        done
    done
    rm -f "$RUN_DIR"/*.cpio
fi

# Rounds of module MOD in the current dimension (PFX: "" for the client
# dimension, "srv-" for the server's): fio-PFXMOD-r1 ... in order, or
# fio-MOD from a client run that had a single round.
rounds_of() {
    local mod d
    mod=$(dirmod "$1")
    if [ -z "$PFX" ] && [ -d "$RUN_DIR/fio-$mod" ]; then echo "$RUN_DIR/fio-$mod"; fi
    for d in "$RUN_DIR/fio-$PFX$mod"-r*; do if [ -d "$d" ]; then echo "$d"; fi; done | sort -V
}

# round_of MOD DIR: the round suffix of DIR ("-r3"), as rounds pair up.
round_of() { echo "${2##*/fio-"$PFX$(dirmod "$1")"}"; }

# dirmod MOD: the tables compare a baseline "c" with "rs"; in the version
# dimension (PFX ver-) those are rpcrdma_rs on version 1 and on version 2,
# whose rounds are fio-ver-v1-rN and fio-ver-v2-rN.
dirmod() {
    if [ "$PFX" = ver- ]; then
        case $1 in c) echo v1 ;; rs) echo v2 ;; *) echo "$1" ;; esac
    else
        echo "$1"
    fi
}


# fmt UNIT V: a value as the table shows it.
fmt() {
    [ "$2" = - ] && { echo -; return; }
    case $1 in
    MB/s) awk -v v="$2" 'BEGIN { printf "%.1f", v }' ;;
    *) awk -v v="$2" 'BEGIN { printf "%.0f", v }' ;;
    esac
}

label() {
    if [ "$PFX" = ver- ]; then
        case $1 in c) echo "version 1" ;; rs) echo "version 2" ;; *) echo "$1" ;; esac
    else
        case $1 in c) echo "rpcrdma.ko" ;; rs) echo "rpcrdma_rs" ;; *) echo "$1" ;; esac
    fi
}

# ratio C X: X/C to two decimals, or "-".
ratio() {
    awk -v c="$1" -v x="$2" \
        'BEGIN { if (c ~ /^[0-9.]+$/ && x ~ /^[0-9.]+$/ && c > 0) printf "%.2f", x / c; else print "-" }'
}

# Where the time goes, per NFS operation: the client's mountstats (both
# mounts, all rounds): calls per round, and per call the mean round trip
# (rtt: from handing the call to the transport to finding its reply) and
# the mean total (exec: from the RPC task's start to its end, queueing in
# the client included).
# op_stats MOD: "OP calls-per-round rtt-ms exec-ms" per operation with calls.
op_stats() {
    local files=() d
    for d in ${DIRS[$1]}; do [ ! -s "$d/mountstats.txt" ] || files+=("$d/mountstats.txt"); done
    ((${#files[@]})) || return 0
    awk -v n="${#files[@]}" '
        /^device / { nfs = ($0 ~ / with fstype nfs/) }
        nfs && /^\t *[A-Z_0-9]+: [0-9]/ && NF == 10 {
            op = substr($1, 1, length($1) - 1)
            calls[op] += $2; rtt[op] += $8; exec[op] += $9
        }
        END {
            for (op in calls) if (calls[op] > 0)
                printf "%s %.0f %.2f %.2f\n", op, calls[op] / n, rtt[op] / calls[op], exec[op] / calls[op]
        }' "${files[@]}" | sort
}

# cpu_sample DIR JOB: "busy user sys softirq window" in ticks for the side
# the current dimension measures (SIDE), or nothing. The client's window is
# its own (/proc/stat around fio, ramp included). The server's ticks are
# taken around the client's window (see server_cpu in tests/vm/bench.sh),
# a fraction of a second wider at each end while the trigger file travels;
# its busy ticks are divided by the client's window, so that the server's
# share is over the same seconds as the operations it served (its own window
# if the client's sample is missing). Busy is everything but idle (and
# iowait), hardirq and steal included.
cpu_sample() {
    local f=$1/$2.cpu cu cs cq ci co
    if [ "$SIDE" = client ]; then
        [ -s "$f" ] || return 0
        read -r cu cs cq ci co < "$f"
        echo "$((cu + cs + cq + co)) $cu $cs $cq $((cu + cs + cq + ci + co))"
    else
        local g=$1/$2.scpu su ss sq si so t
        [ -s "$g" ] || return 0
        read -r su ss sq si so < "$g"
        t=$((su + ss + sq + si + so))
        if [ -s "$f" ]; then
            read -r cu cs cq ci co < "$f"
            t=$((cu + cs + cq + ci + co))
        fi
        echo "$((su + ss + sq + so)) $su $ss $sq $t"
    fi
}

# How busy the measured side's one vCPU was during each job: a side at 100%
# is CPU-bound, and its split says where; one with idle time waits on the
# other side or the link.
# cpu_cell MOD JOB: "busy% (user/sys/softirq)" as medians over the rounds.
cpu_cell() {
    local d bb bu bk bq t pb pu pk pq b=() u=() k=() q=()
    for d in ${DIRS[$1]}; do
        read -r bb bu bk bq t < <(cpu_sample "$d" "$2"; echo)
        [ -n "$t" ] && [ "$t" -gt 0 ] || continue
        read -r pb pu pk pq < <(awk -v t="$t" 'BEGIN { for (i = 1; i < ARGC; i++) printf "%.1f ", 100 * ARGV[i] / t }' \
            "$bb" "$bu" "$bk" "$bq")
        b+=("$pb") u+=("$pu") k+=("$pk") q+=("$pq")
    done
    ((${#b[@]})) || { echo -; return; }
    printf '%.0f%% (%.0f/%.0f/%.0f)' "$(stats "${b[@]}" | cut -d' ' -f1)" "$(stats "${u[@]}" | cut -d' ' -f1)" \
        "$(stats "${k[@]}" | cut -d' ' -f1)" "$(stats "${q[@]}" | cut -d' ' -f1)"
}

# CPU per operation: the busy share of the vCPU over the job's window
# divided by the operations per second (a 1 MiB transfer counts as one
# operation): busy% x window / operations, in ms of vCPU.
# cpu_per_op MOD JOB DIR [ROUND]: one value per round ("-" for a round
# without one), or that of round ROUND (its directory's suffix).
cpu_per_op() {
    local d bb t iops
    for d in ${DIRS[$1]}; do
        [ -z "${4:-}" ] || [ "$(round_of "$1" "$d")" = "$4" ] || continue
        iops=$(fio_value "$d" "$2" "$3" IOPS)
        read -r bb _ _ _ t < <(cpu_sample "$d" "$2"; echo)
        if [ -z "$t" ] || [ "$iops" = - ]; then echo -; continue; fi
        awk -v b="$bb" -v t="$t" -v i="$iops" \
            'BEGIN { if (i > 0 && t > 0) printf "%.3f\n", 1000 * b / t / i; else print "-" }'
    done
}

# rpc_costs JOB DIR...: what the server spent per RPC nfsd served in the
# job's window, one line per round directory (none for one without
# counts): "cpu_ms ctxt intr softirq". Every RPC counts, a job's setup
# included (fio lays out the files a delete job removes), so both servers
# are charged for the same work; per fio operation, a job whose setup is a
# large part of its window is charged for the setup at the timed part's
# rate.
rpc_costs() {
    local job=$1 d b c i s r
    shift
    for d in "$@"; do
        [ -s "$d/$job.ssched" ] && [ -s "$d/$job.scpu" ] || continue
        read -r c i s r < "$d/$job.ssched"
        [ -n "$r" ] && [ "$r" -gt 0 ] || continue
        b=$(awk '{ print $1 + $2 + $3 + $5 }' "$d/$job.scpu")
        awk -v b="$b" -v c="$c" -v i="$i" -v s="$s" -v r="$r" \
            'BEGIN { printf "%.3f %.2f %.2f %.2f\n", 10 * b / r, c / r, i / r, s / r }'
    done
}

# per_rpc MOD JOB COL [ROUND]: column COL of rpc_costs, one value per
# round of MOD, or that of round ROUND.
per_rpc() {
    local d dirs=()
    for d in ${DIRS[$1]}; do
        [ -z "${4:-}" ] || [ "$(round_of "$1" "$d")" = "$4" ] || continue
        dirs+=("$d")
    done
    rpc_costs "$2" "${dirs[@]}" | cut -d' ' -f"$3"
}

# has_rpcs: whether any server round counted nfsd's RPCs (runs before
# fdf4577 counted wakeups only).
has_rpcs() {
    local d
    for d in ${DIRS[c]} ${DIRS[rs]}; do
        if awk 'NF >= 4 && $4 > 0 { found = 1 } END { exit !found }' "$d"/*.ssched 2>/dev/null; then return 0; fi
    done
    return 1
}

# has_cpu: whether any round of this dimension has CPU samples of SIDE.
has_cpu() {
    local ext=cpu d
    [ "$SIDE" = client ] || ext=scpu
    for d in ${DIRS[c]} ${DIRS[rs]}; do
        if ls "$d"/*."$ext" > /dev/null 2>&1; then return 0; fi
    done
    return 1
}

runtime=$(cat "$RUN_DIR/runtime.txt" 2>/dev/null || echo "?")
link=$(cat "$RUN_DIR/link.txt" 2>/dev/null || echo tcp)
kernel=$(cat "$RUN_DIR/kernel.txt" 2>/dev/null || echo test)
vers=$(cat "$RUN_DIR/vers.txt" 2>/dev/null || echo 4.2)
clock=$(cat "$RUN_DIR/clock.txt" 2>/dev/null || echo host)
# Runs before the actimeo=0 metadata mount ran the metadata jobs on /mnt.
md_mount="the data mount (attribute cache on)"
if grep -qs 'acregmin=0,acregmax=0,acdirmin=0,acdirmax=0' "$RUN_DIR"/fio-*/md-mount.txt; then
    md_mount="a second mount with actimeo=0"
fi

declare -A DIRS MOUNT NROUNDS

# render DIM: the table and chart of one dimension (client or server) into
# bench.txt/.png (client) or bench-server.txt/.png, and print the table.
render() {
    local dim=$1 sfx= mod w title job what dir unit ratio noise pr d r pmed plo phi paired block=0 titles=() i
    local other
    local ha=C hb=rpcrdma_rs hr=rs/C vs="rpcrdma.ko vs rpcrdma_rs" workloads=("${WORKLOADS[@]}")
    DIM=$dim SIDE=$dim PFX=
    case $dim in
    server) PFX=srv- sfx=-server ;;
    version)
        # The client samples its CPU; the version dimension runs its jobs
        # only.
        PFX=ver- sfx=-version SIDE=client ha=v1 hb=v2 hr=v2/v1 vs="RPC-over-RDMA version 1 vs 2"
        workloads=()
        for w in "${WORKLOADS[@]}"; do
            IFS='|' read -r _ job _ <<< "$w"
            case " ${JOBS:-$VERSION_JOBS} " in *" $job "*) workloads+=("$w") ;; esac
        done ;;
    esac
    # What stays fixed while the dimension's module changes.
    case $dim in
    client) other="server: rpcrdma.ko" ;;
    server) other="client: rpcrdma.ko" ;;
    version) other="rpcrdma_rs client and server; version 1 by the client's max_version=1" ;;
    esac
    for mod in c rs; do
        DIRS[$mod]=$(rounds_of "$mod")
        NROUNDS[$mod]=$(printf '%s' "${DIRS[$mod]}" | grep -c . || true)
        # The mount each round negotiated; one line if all rounds agree.
        MOUNT[$mod]=$(for d in ${DIRS[$mod]}; do cat "$d/mount.txt" 2>/dev/null || true; done | sort -u | paste -sd ';' -)
    done
    local table=$RUN_DIR/bench$sfx.txt dat=$RUN_DIR/bench$sfx.dat png=$RUN_DIR/bench$sfx.png
    {
        echo "$dim: $vs ($other)"
        echo "NFSv$vers over RDMA (soft-RoCE, QEMU $VM_ACCEL, $link link, $kernel kernel, $clock clock), fio ${runtime} s per timed job"
        for mod in c rs; do
            echo "  $(label "$mod"): ${NROUNDS[$mod]} rounds, mount ${MOUNT[$mod]:-not mounted}"
            # The version each round's connection settled on (debugfs).
            [ "$dim" != version ] || echo "    rdma_version per round: $(for d in ${DIRS[$mod]}; do
                cat "$d/rdma-version.txt" 2>/dev/null || echo -; done | paste -sd ' ' -)"
        done
        echo "  median [min-max] over the rounds; $hr = ratio of the medians; per round = $hr of each"
        echo "  round's two boots, median [min-max]; metadata jobs on $md_mount"
        printf '%-21s %-5s %20s %20s %6s %18s\n' workload unit "$ha" "$hb" "$hr" "per round"
    } > "$table"
    : > "$dat"
    for w in "${workloads[@]}"; do
        IFS='|' read -r title job what <<< "$w"
        dir=${what%% *} unit=${what#* }
        declare -A med=() lo=() hi=() cell=() byround=()
        for mod in c rs; do
            local vals=() n=0 v
            for d in ${DIRS[$mod]}; do
                v=$(fio_value "$d" "$job" "$dir" "$unit")
                vals+=("$v") byround[$mod$(round_of "$mod" "$d")]=$v
            done
            read -r "med[$mod]" "lo[$mod]" "hi[$mod]" n < <(stats "${vals[@]}")
            if [ "${med[$mod]}" = - ]; then
                cell[$mod]=-
            else
                cell[$mod]="$(fmt "$unit" "${med[$mod]}") [$(fmt "$unit" "${lo[$mod]}")-$(fmt "$unit" "${hi[$mod]}")]"
                # Rounds that produced no number (a failed boot or job) are left out.
                [ "$n" -eq "${NROUNDS[$mod]}" ] || cell[$mod]="${cell[$mod]} n=$n"
            fi
        done
        ratio=- noise=
        if [ "${med[c]}" != - ] && [ "${med[rs]}" != - ] &&
            awk -v c="${med[c]}" 'BEGIN { exit !(c > 0) }'; then
            ratio=$(ratio "${med[c]}" "${med[rs]}")
            # The ranges overlap: the rounds cannot tell the two modules apart.
            if awk -v a="${lo[c]}" -v b="${hi[c]}" -v x="${lo[rs]}" -v y="${hi[rs]}" \
                'BEGIN { exit !(x <= b && a <= y) }'; then
                noise="within noise"
            fi
        fi
        # Paired: rs/C within each round (the two boots of a round run back
        # to back, so slow drift of the host's load cancels), median [min-max].
        pr=()
        for d in ${DIRS[c]}; do
            r=$(round_of c "$d")
            pr+=("$(ratio "${byround[c$r]}" "${byround[rs$r]:--}")")
        done
        read -r pmed plo phi _ < <(stats "${pr[@]}")
        paired=-
        [ "$pmed" = - ] || paired=$(awk -v m="$pmed" -v a="$plo" -v b="$phi" 'BEGIN { printf "%.2f [%.2f-%.2f]", m, a, b }')
        printf '%-21s %-5s %20s %20s %6s %18s %s\n' "$title" "$unit" "${cell[c]}" "${cell[rs]}" "$ratio" "$paired" "$noise" |
            sed 's/ *$//' >> "$table"
        # One gnuplot data block per workload: module, median, min, max.
        {
            printf '# %s (%s) rs/C %s %s\n' "$title" "$unit" "$ratio" "$noise"
            for mod in c rs; do
                printf '%s\t%s\t%s\t%s\n' "$(label "$mod")" "${med[$mod]/-/0}" "${lo[$mod]/-/0}" "${hi[$mod]/-/0}"
            done
            printf '\n\n'
        } >> "$dat"
        titles[block]="$title ($unit): rs/C ${ratio}${noise:+, $noise}"
        block=$((block + 1))
    done

    local ops
    ops=$(join -a 1 -a 2 -e - -o 0,1.2,1.3,1.4,2.2,2.3,2.4 <(op_stats c) <(op_stats rs) |
        awk '$2 >= 10 || $5 >= 10' | sort -k2,2gr)
    if [ -n "$ops" ]; then
        {
            echo
            local whose=
            [ -z "$PFX" ] || whose="the client's "
            echo "per NFS operation with 10 or more calls (${whose}mountstats): calls per round; rtt and exec: ms per call"
            printf '%-12s %8s %8s %8s   %8s %8s %8s\n' op "$ha calls" rtt exec "$hb calls" rtt exec
            awk '{ printf "%-12s %8s %8s %8s   %8s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7 }' <<< "$ops"
            # rtt runs from rq_xtime; a transport that sets it after the reply
            # can arrive gets a stale rq_xtime for some calls.
            if awk '($3 != "-" && $3 > $4) || ($6 != "-" && $6 > $7) { bad = 1 } END { exit !bad }' <<< "$ops"; then
                echo "  (rtt above exec is impossible with a true rq_xtime: that client stamped some calls after their reply was found)"
            fi
        } >> "$table"
    fi
    if [ "$dim" = version ]; then
        # Where version 2's 4096-byte default threshold keeps messages
        # inline: Calls sent as RDMA_NOMSG (Long Calls) and Reply chunk
        # segments offered (Long Replies) over the whole boot. The metadata
        # mount shares the data mount's connection, whose line mountstats
        # prints for both: the largest of each counter is the connection's.
        {
            echo
            echo "Long Calls and Replies per round (the client's mountstats, xprt: rdma; the whole boot):"
            echo "  Calls sent as RDMA_NOMSG, Reply chunk segments offered, Sends"
            printf '%-10s %-6s %12s %14s %10s\n' version round "Long Calls" "Reply chunks" Sends
            for mod in c rs; do
                for d in ${DIRS[$mod]}; do
                    [ -s "$d/mountstats.txt" ] || continue
                    awk -v v="$(label "$mod")" -v r="$(round_of "$mod" "$d")" '
                        $1 == "xprt:" && $2 == "rdma" {
                            if ($23 > n) n = $23; if ($15 > c) c = $15; if ($8 > s) s = $8 }
                        END { printf "%-10s %-6s %12d %14d %10d\n", v, substr(r, 2), n, c, s }' "$d/mountstats.txt"
                done
            done
        } >> "$table"
    fi
    if has_cpu; then
        {
            echo
            echo "$SIDE vCPU busy during each job, median over the rounds: busy% (user/sys/softirq %)"
            [ "$SIDE" = client ] || echo "  (the server's busy ticks over the client's job window)"
            printf '%-21s %22s %22s\n' workload "$ha" "$hb"
            for w in "${workloads[@]}"; do
                IFS='|' read -r title job _ <<< "$w"
                printf '%-21s %22s %22s\n' "$title" "$(cpu_cell c "$job")" "$(cpu_cell rs "$job")"
            done
        } >> "$table"
        {
            echo
            echo "$SIDE CPU per operation (1 MiB for the sequential jobs): ms of vCPU (busy share / operations per"
            echo "  second), median [min-max] over the rounds; per round = $hr of each round's two boots"
            printf '%-21s %22s %22s %6s %18s\n' workload "$ha" "$hb" "$hr" "per round"
            for w in "${workloads[@]}"; do
                IFS='|' read -r title job what <<< "$w"
                declare -A cm=() cl=() ch=()
                for mod in c rs; do
                    # shellcheck disable=SC2046 # one value per round
                    read -r "cm[$mod]" "cl[$mod]" "ch[$mod]" _ < <(stats $(cpu_per_op "$mod" "$job" "${what%% *}"))
                done
                local cells=()
                for mod in c rs; do
                    if [ "${cm[$mod]}" = - ]; then cells+=(-); else
                        cells+=("$(printf '%.3f [%.3f-%.3f]' "${cm[$mod]}" "${cl[$mod]}" "${ch[$mod]}")")
                    fi
                done
                r=$(ratio "${cm[c]}" "${cm[rs]}")
                pr=()
                for d in ${DIRS[c]}; do
                    local rnd
                    rnd=$(round_of c "$d")
                    pr+=("$(ratio "$(cpu_per_op c "$job" "${what%% *}" "$rnd")" \
                        "$(cpu_per_op rs "$job" "${what%% *}" "$rnd")")")
                done
                read -r pmed plo phi _ < <(stats "${pr[@]}")
                paired=-
                [ "$pmed" = - ] || paired=$(awk -v m="$pmed" -v a="$plo" -v b="$phi" 'BEGIN { printf "%.2f [%.2f-%.2f]", m, a, b }')
                printf '%-21s %22s %22s %6s %18s\n' "$title" "${cells[0]}" "${cells[1]}" "$r" "$paired"
            done
        } >> "$table"
    fi
    if [ "$SIDE" = server ] && has_rpcs; then
        {
            echo
            echo "server per RPC served in the job's window (setup included; both servers do the same RPCs): ms of"
            echo "  vCPU, median [min-max] over the rounds, per round = rs/C of each round's two boots; then"
            echo "  context switches/interrupts/softirqs per RPC, medians"
            printf '%-21s %22s %22s %6s %18s %17s %17s\n' workload C rpcrdma_rs rs/C "per round" "C wakeups" "rs wakeups"
            for w in "${workloads[@]}"; do
                IFS='|' read -r title job _ <<< "$w"
                declare -A pm=() pl=() ph=() wk=()
                local cells=() col
                for mod in c rs; do
                    # shellcheck disable=SC2046 # one value per round
                    read -r "pm[$mod]" "pl[$mod]" "ph[$mod]" _ < <(stats $(per_rpc "$mod" "$job" 1))
                    if [ "${pm[$mod]}" = - ]; then cells+=(-); else
                        cells+=("$(printf '%.3f [%.3f-%.3f]' "${pm[$mod]}" "${pl[$mod]}" "${ph[$mod]}")")
                    fi
                    wk[$mod]=
                    for col in 2 3 4; do
                        # shellcheck disable=SC2046 # one value per round
                        wk[$mod]+="$(stats $(per_rpc "$mod" "$job" "$col") | cut -d' ' -f1)/"
                    done
                    wk[$mod]=${wk[$mod]%/}
                done
                pr=()
                for d in ${DIRS[c]}; do
                    local rnd
                    rnd=$(round_of c "$d")
                    pr+=("$(ratio "$(per_rpc c "$job" 1 "$rnd")" "$(per_rpc rs "$job" 1 "$rnd")")")
                done
                read -r pmed plo phi _ < <(stats "${pr[@]}")
                paired=-
                [ "$pmed" = - ] || paired=$(awk -v m="$pmed" -v a="$plo" -v b="$phi" 'BEGIN { printf "%.2f [%.2f-%.2f]", m, a, b }')
                printf '%-21s %22s %22s %6s %18s %17s %17s\n' "$title" "${cells[0]}" "${cells[1]}" \
                    "$(ratio "${pm[c]}" "${pm[rs]}")" "$paired" "${wk[c]}" "${wk[rs]}"
            done
        } >> "$table"
    fi
    echo
    cat "$table"

    # The chart: one panel per workload (each in its own unit), a bar per
    # module at the median, error bars from the smallest to the largest round.
    local heading
    case $dim in
    client) heading="rpcrdma.ko vs rpcrdma_rs as NFSv$vers client (same C server" ;;
    server) heading="rpcrdma.ko vs rpcrdma_rs as NFSv$vers server (same C client" ;;
    version) heading="RPC-over-RDMA version 1 vs 2, NFSv$vers, rpcrdma_rs on both ends (" ;;
    esac
    {
        cat <<GP
set terminal pngcairo size 1600,800 noenhanced font ",10"
set output "$png"
set multiplot layout 2,4 title "$heading, QEMU $VM_ACCEL, $link link): median and min-max of ${NROUNDS[c]}/${NROUNDS[rs]} rounds"
set style fill solid 0.8 border -1
set boxwidth 0.6
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set xrange [-0.6:1.6]
set grid ytics
set title font ",9"
unset key
GP
        for ((i = 0; i < block; i++)); do
            printf 'set title "%s"\n' "${titles[i]}"
            # shellcheck disable=SC2016 # gnuplot's $0
            printf 'plot "%s" index %d using 0:2:($0 == 0 ? 0x4477aa : 0xee7733):xtic(1) with boxes lc rgb variable, ' "$dat" "$i"
            printf '"" index %d using 0:2:3:4 with yerrorbars lc rgb "black" pt 0 lw 1.5\n' "$i"
        done
        echo "unset multiplot"
    } > "$RUN_DIR/bench$sfx.gp"
    gnuplot "$RUN_DIR/bench$sfx.gp" && echo "chart: $png"
}

# The dimensions asked for that have rounds in RUN_DIR (a REPORT of an older
# run has the client's only).
shown=0
for dim in $BENCH_DIMS; do
    case $dim in client) PFX= ;; server) PFX=srv- ;; version) PFX=ver- ;; esac
    [ -n "$(rounds_of c)$(rounds_of rs)" ] || { echo "no $dim rounds in $RUN_DIR"; continue; }
    render "$dim"
    shown=$((shown + 1))
done
[ "$shown" -gt 0 ] || T_FAIL=$((T_FAIL + 1))

# PROFILER=funcs: the kernel calls per RPC under each module, for the
# first round that has both, the functions whose counts differ most (the
# module's own Rust code is not counted: ftrace sees C functions).
# funcs_diff WHO C-FILE RS-FILE OUT
funcs_diff() {
    echo "$1 kernel calls per RPC (ftrace function profiler): C, rpcrdma_rs, difference"
    awk 'FNR == 1 { f++ } $1 == "rpcs" { r[f] = $2; next }
         NF == 2 { c[f, $2] = $1; n[$2] = 1 }
         END { if (r[1] > 0 && r[2] > 0) for (k in n) {
                   a = c[1, k] / r[1]; b = c[2, k] / r[2]
                   if (a != b) printf "%10.2f %10.2f %+9.2f  %s\n", a, b, b - a, k } }' "$2" "$3" |
        sort -k3,3gr > "$4"
    printf '  RPCs: C %s, rpcrdma_rs %s; more under rpcrdma_rs:\n' \
        "$(sed -n 's/^rpcs //p' "$2")" "$(sed -n 's/^rpcs //p' "$3")"
    head -n 15 "$4"
    echo "  fewer under rpcrdma_rs:"
    tail -n 15 "$4" | sort -k3,3g
    echo "  every function: $4"
}
# funcs_pair WHO C-FILE RS-FILE OUT: funcs_diff if both files are counts.
funcs_pair() {
    head -n 1 "$2" 2>/dev/null | grep -q '^rpcs ' && head -n 1 "$3" 2>/dev/null | grep -q '^rpcs ' &&
        funcs_diff "$@"
}
for ((round = 1; round <= REPS; round++)); do
    funcs_pair server "$RUN_DIR/fio-srv-c-r$round/perf-server.txt" \
        "$RUN_DIR/fio-srv-rs-r$round/perf-server.txt" "$RUN_DIR/funcs-diff.txt" && break
done
for job in $PROFILE; do
    for ((round = 1; round <= REPS; round++)); do
        funcs_pair "client ($job, round $round)" "$RUN_DIR/fio-c-r$round/perf-client-$job.txt" \
            "$RUN_DIR/fio-rs-r$round/perf-client-$job.txt" "$RUN_DIR/funcs-client-$job.txt" && break
    done
done
# PROFILER=insns: the kernel's instructions per RPC under each module.
for job in $PROFILE; do
    for ((round = 1; round <= REPS; round++)); do
        c=$RUN_DIR/fio-c-r$round rs=$RUN_DIR/fio-rs-r$round
        [ -e "$c/insns-client-${job}_stop.txt" ] && [ -e "$rs/insns-client-${job}_stop.txt" ] || continue
        python3 "$REPO_DIR/tools/qemu-insns/report.py" "$RUN_DIR/System.map" "$job" \
            "rpcrdma.ko=$c:$RUN_DIR/rpcrdma.ko" "rpcrdma_rs=$rs:$RUN_DIR/rpcrdma_rs.ko" \
            > "$RUN_DIR/insns-client-$job.txt" || T_FAIL=$((T_FAIL + 1))
        head -n 60 "$RUN_DIR/insns-client-$job.txt"
        echo "  every function: $RUN_DIR/insns-client-$job.txt"
        break
    done
done
echo "logs, fio JSON and mountstats per round: $RUN_DIR"
if [ -z "$REPORT" ]; then
    printf 'total %d min %d s\n' $(((SECONDS - t_start) / 60)) $(((SECONDS - t_start) % 60))
fi
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"
[ "$T_FAIL" -eq 0 ]

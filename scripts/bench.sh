#!/usr/bin/env bash
# NFS-over-RDMA benchmark (a measurement, not a test): boot the VM pair twice,
# the client first with rpcrdma.ko and then with rpcrdma_rs.ko, against the
# same C server, and run the same fio workloads on the client's NFSv4.2 mount
# (rsize/wsize 1 MiB asked for): sequential 1 MiB write and read (libaio,
# direct, iodepth 4), 4 KiB random read at iodepth 1 and 16, and metadata
# (fio's filecreate, filestat and filedelete engines on 200 files). Prints a
# table (workload, C, rpcrdma_rs, ratio rs/C) and draws it as a PNG.
#
#   RUNTIME=20   seconds per time-based fio job
#   SIZE=64      MiB in the data file
#   CLIENTS="c rs"   which client modules to run (both for the ratio)
#   REPORT=out/bench-...   no VMs: print the table and chart of that run again
#
# Under QEMU TCG the absolute numbers say little about real hardware; the
# ratio between the two clients on the same machine is the point.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

RUNTIME=${RUNTIME:-20} SIZE=${SIZE:-64} CLIENTS=${CLIENTS:-c rs} REPORT=${REPORT:-}
T_PASS=0 T_FAIL=0
RUN_DIR=${REPORT:-$REPO_DIR/out/bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RUN_DIR"

# The host side needs jq for fio's JSON and gnuplot for the chart.
need=()
command -v jq >/dev/null || need+=(jq)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
if ((${#need[@]})); then
    step "apt: installing ${need[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi

if [ -z "$REPORT" ]; then
    kbuild=$("$REPO_DIR/scripts/kernel-build.sh")
    rs_ko=$(KDIR=$kbuild "$REPO_DIR/scripts/build-module.sh")
    vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
fi

# workload|fio job|what to show
WORKLOADS=(
    "seq write 1 MiB qd4|seq_write_1m|write MB/s"
    "seq read 1 MiB qd4|seq_read_1m|read MB/s"
    "rand read 4 KiB qd1|rand_read_4k_qd1|read IOPS"
    "rand read 4 KiB qd16|rand_read_4k_qd16|read IOPS"
    "create 200 files|md_create|read IOPS"
    "stat files|md_stat|read IOPS"
    "delete 200 files|md_delete|read IOPS"
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

declare -A RSIZE
for mod in $CLIENTS; do
    if [ -n "$REPORT" ]; then
        RSIZE[$mod]=$(cat "$RUN_DIR/fio-$mod/mount.txt" 2>/dev/null || true)
        continue
    fi
    step "bench: client $mod (fio ${RUNTIME} s per job)"
    t0=$SECONDS
    run_pair "bench-$mod" 1500 "rr.mod=c rr.maxblksize=1048576" \
        "rr.script=bench rr.mod=$mod rr.proto=rdma rr.vers=4.2 rr.runtime=$RUNTIME rr.size=$SIZE"
    echo "  bench-$mod: $((SECONDS - t0)) s"
    # Split the results port into one JSON file per job.
    mkdir -p "$RUN_DIR/fio-$mod"
    tr -d '\r' < "$VM_DIR/client.results.log" | awk -v dir="$RUN_DIR/fio-$mod" '
        /^RR-FIO-BEGIN / { out = dir "/" $2 ".json"; next }
        /^RR-FIO-END /   { close(out); out = ""; next }
        out != ""        { print > out }'
    RSIZE[$mod]=$(tr -d '\r' < "$VM_DIR/client.results.log" | sed -n 's/^RR-MOUNT //p')
    echo "${RSIZE[$mod]}" > "$RUN_DIR/fio-$mod/mount.txt"
done

label() { case $1 in c) echo "rpcrdma.ko" ;; rs) echo "rpcrdma_rs" ;; *) echo "$1" ;; esac; }
table=$RUN_DIR/bench.txt
dat=$RUN_DIR/bench.dat
{
    echo "NFSv4.2 over RDMA (soft-RoCE, QEMU $VM_ACCEL), fio ${RUNTIME} s per timed job"
    for mod in $CLIENTS; do echo "  $(label "$mod") mount: ${RSIZE[$mod]:-not mounted}"; done
    printf '%-22s %-10s %12s %12s %8s\n' workload unit C rpcrdma_rs rs/C
} > "$table"
: > "$dat"
for w in "${WORKLOADS[@]}"; do
    IFS='|' read -r title job what <<< "$w"
    dir=${what%% *} unit=${what#* }
    c=$(fio_value "$RUN_DIR/fio-c" "$job" "$dir" "$unit")
    r=$(fio_value "$RUN_DIR/fio-rs" "$job" "$dir" "$unit")
    ratio=-
    if [[ $c =~ ^[0-9.]+$ && $r =~ ^[0-9.]+$ ]] && awk -v c="$c" 'BEGIN { exit !(c > 0) }'; then
        ratio=$(awk -v c="$c" -v r="$r" 'BEGIN { printf "%.2f", r / c }')
    fi
    printf '%-22s %-10s %12s %12s %8s\n' "$title" "$unit" "$c" "$r" "$ratio" >> "$table"
    printf '"%s\\n(%s)"\t%s\n' "$title" "$unit" "${ratio/-/0}" >> "$dat"
done
echo
cat "$table"

# The chart: rs/C per workload; 1.0 is parity with rpcrdma.ko.
png=$RUN_DIR/bench.png
gnuplot <<EOF && echo "chart: $png"
set terminal pngcairo size 1250,600 noenhanced font ",10"
set output "$png"
set title "rpcrdma_rs relative to rpcrdma.ko (same C server, QEMU $VM_ACCEL); mounts: c ${RSIZE[c]:-?}, rs ${RSIZE[rs]:-?}"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.6
set ylabel "rpcrdma_rs / rpcrdma.ko"
set yrange [0:*]
set grid ytics
set xtics font ",9"
set bmargin 5
unset key
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "red"
plot "$dat" using 2:xtic(1) lc rgb "#4477aa", \
     "" using 0:2:(sprintf("%.2f", \$2)) with labels offset 0,0.7 notitle
EOF
rm -f "$RUN_DIR"/*.cpio
echo "logs and fio JSON: $RUN_DIR"
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"
[ "$T_FAIL" -eq 0 ]

#!/usr/bin/env bash
# The soak (a measurement, not part of make test; issue 30): for each
# client/server pair, one boot of the VM pair in which the client
# (tests/vm/soak.sh) runs mixed I/O for SOAK_MINUTES while a shuffled
# schedule of faults, spread over that time, hits it: server link outages
# of 5-30 s (QEMU set_link, through scripts/vm.sh vm_fault_watch), nfsd
# restarts, server and client rxe device removals and re-adds, and forced
# unmounts of a second, busy mount. Prints one table, a row per pair, the
# C/C pair as the reference: faults run and survived (I/O moved again
# within SOAK_BOUND s of the fault's end), the stall beyond each fault's
# own length (median and worst), data errors (compare failures), RPCs
# failed to the application (I/O errors the loops saw; removes replayed
# across an nfsd restart apart: tests/vm/soak.sh replayed_removes), kernel splats
# (both consoles scanned as the tests do: scripts/vm.sh BAD_LOG), leaks at
# the end (the server's teardown check and the client's: RDMA resources
# back to their counts, module unloads; the three kmalloc caches that grew
# most and MemFree, reported) and deaf servers (a link outage
# after which the client never came back and the server's GSI QP was out
# of RTS: rxe's, not the transport's). A second table gives the stall by
# fault kind. Both go to RUN_DIR/table.txt.
#
#   PAIRS="c-c rs-c c-rs rs-rs"  CLIENT-SERVER: the transport module in each VM
#   SOAK_MINUTES=60   minutes of I/O per pair
#   LINK_FAULTS=50 NFSD_FAULTS=10 SRV_DEVDEL=5 CLI_DEVDEL=5 UMOUNT_F=3
#                     the schedule per pair (the same for every pair)
#   SOAK_SEED=1       the schedule's shuffle and outage lengths
#   SOAK_BOUND=180    seconds after a fault's end within which I/O must move
#   SOAK_SIZE=8       MiB of the streaming write-read-compare file
#   SOAK_TIMEOUT=s    per pair, for a guest that hangs (SOAK_MINUTES x 90 + 900)
#   SOAK_JOBS=1       pairs run at once (2: four VMs share the cores, each
#                     pair's I/O and recoveries slower, all pairs alike)
#   SOAK_OUT=dir      run into this directory (pairs already there stay in
#                     the table: one lock-holding run per pair, one table)
#   REPORT=dir        no VMs: print the table of that run again
#   SOAK_KARGS=words  more kernel command line words for both VMs (say
#                     trace_event=rdma_cma:cm_event_handler tp_printk: the
#                     events in the consoles, on the faults' timeline)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

PAIRS=${PAIRS:-c-c rs-c c-rs rs-rs}
SOAK_MINUTES=${SOAK_MINUTES:-60}
LINK_FAULTS=${LINK_FAULTS:-50} NFSD_FAULTS=${NFSD_FAULTS:-10} SRV_DEVDEL=${SRV_DEVDEL:-5}
CLI_DEVDEL=${CLI_DEVDEL:-5} UMOUNT_F=${UMOUNT_F:-3}
SOAK_SEED=${SOAK_SEED:-1} SOAK_BOUND=${SOAK_BOUND:-180} SOAK_SIZE=${SOAK_SIZE:-8}
SOAK_JOBS=${SOAK_JOBS:-1} REPORT=${REPORT:-} SOAK_KARGS=${SOAK_KARGS:-}
T_PASS=0 T_FAIL=0
for v in SOAK_JOBS SOAK_MINUTES LINK_FAULTS NFSD_FAULTS SRV_DEVDEL CLI_DEVDEL UMOUNT_F SOAK_SEED SOAK_BOUND SOAK_SIZE; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v=${!v}: a number"
done
[ "$SOAK_JOBS" -ge 1 ] || die "SOAK_JOBS=$SOAK_JOBS: at least 1"
for p in $PAIRS; do
    [[ $p =~ ^(c|rs)-(c|rs)$ ]] || die "PAIRS: '$p' is not CLIENT-SERVER with c or rs each"
done
RUN_DIR=${REPORT:-${SOAK_OUT:-$REPO_DIR/out/soak-$(date +%Y%m%d-%H%M%S)}}
[ -z "$REPORT" ] || [ -d "$REPORT" ] || die "REPORT=$REPORT: no such directory"
mkdir -p "$RUN_DIR"
cd "$REPO_DIR"

mod_name() { case $1 in c) echo rpcrdma.ko ;; rs) echo rpcrdma_rs ;; esac; }

if [ -z "$REPORT" ]; then
    t_start=$SECONDS
    kbuild=$("$REPO_DIR/scripts/kernel-build.sh")
    rs_ko=$(KDIR=$kbuild "$REPO_DIR/scripts/build-module.sh")
    vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
    nfaults=$((LINK_FAULTS + NFSD_FAULTS + SRV_DEVDEL + CLI_DEVDEL + UMOUNT_F))
    # A guest that finds a fault not survived stops its schedule, so a
    # run outlives SOAK_MINUTES by the faults' recoveries only; the
    # timeout is for a guest that hangs.
    tmo=${SOAK_TIMEOUT:-$((SOAK_MINUTES * 90 + 900))}
    soak=$SOAK_MINUTES,$LINK_FAULTS,$NFSD_FAULTS,$SRV_DEVDEL,$CLI_DEVDEL,$UMOUNT_F,$SOAK_SEED,$SOAK_BOUND
    echo "$SOAK_MINUTES min; $LINK_FAULTS link outages (5-30 s), $NFSD_FAULTS nfsd restarts, $SRV_DEVDEL server and $CLI_DEVDEL client rxe removals (10 s), $UMOUNT_F umount -f; seed $SOAK_SEED, bound $SOAK_BOUND s$([ "$SOAK_JOBS" = 1 ] || echo "; $SOAK_JOBS pairs at a time")" > "$RUN_DIR/config.txt"
    # As make test's scenarios: each pair's output is held and printed,
    # its checks counted, when it ends (scripts/vm.sh reap_scenarios).
    declare -A running=()
    for pair in $PAIRS; do
        while [ ${#running[@]} -ge "$SOAK_JOBS" ]; do
            sleep 2; reap_scenarios running
        done
        cli=${pair%-*} srv=${pair#*-}
        step "soak: $pair (client $(mod_name "$cli"), server $(mod_name "$srv")): $SOAK_MINUTES min, $nfaults faults"
        (
            t0=$SECONDS
            run_pair "soak-$pair" "$tmo" "rr.mod=$srv rr.soak=1 $SOAK_KARGS" \
                "rr.script=soak rr.mod=$cli rr.proto=rdma rr.vers=4.2 rr.size=$SOAK_SIZE rr.soak=$soak $SOAK_KARGS"
            echo "  soak-$pair: $((SECONDS - t0)) s"
        ) > "$RUN_DIR/soak-$pair.out" 2>&1 &
        running[$!]=soak-$pair
    done
    while [ ${#running[@]} -gt 0 ]; do
        sleep 2; reap_scenarios running
    done
    rm -f "$RUN_DIR"/*.cpio
fi

# one_decimal V: V to a tenth ("-", no value, as it is).
one_decimal() { if [ "$1" = - ]; then echo -; else printf '%.1f' "$1"; fi; }

# faults_of DIR [KIND]: the RR-SOAK-FAULT lines of a pair's client,
# "id kind secs stall survived rest".
faults_of() {
    { tr -d '\r' < "$1/client.results.log"; } 2>/dev/null |
        awk -v k="${2:-}" '$1 == "RR-SOAK-FAULT" && (k == "" || $3 == k) { $1 = ""; print substr($0, 2) }'
}

# sum_field DIR NAME: NAME=value of the client's RR-SOAK-SUM line, or -.
sum_field() {
    local v
    v=$({ tr -d '\r' < "$1/client.results.log"; } 2>/dev/null | awk '$1 == "RR-SOAK-SUM"' | tr ' ' '\n' | sed -n "s/^$2=//p")
    echo "${v:--}"
}

# leaks DIR: 0 when both ends' leak checks passed; else the ends whose
# check failed, or "?" for one that never ran (the run stopped first).
leaks() {
    local out= r
    r=$({ tr -d '\r' < "$1/client.results.log"; } 2>/dev/null | awk '$1 == "RR-RESULT" && $2 == "client_no_leak" { print $3 }')
    case $r in PASS) ;; FAIL) out=cli ;; *) out="cli?" ;; esac
    r=$({ tr -d '\r' < "$1/server.results.log"; } 2>/dev/null | awk '$1 == "RR-RESULT" && $2 == "server_teardown_unload_no_leak" { print $3 }')
    case $r in PASS) ;; FAIL) out=${out:+$out,}srv ;; *) out=${out:+$out,}"srv?" ;; esac
    echo "${out:-0}"
}

# mem_of DIR SIDE: "cache:+N,..., MemFree +-K kB" from SIDE's (client or
# server) RR-SOAK-MEM line, the end against before the transport loaded;
# "?" when that end did not get there.
mem_of() {
    { tr -d '\r' < "$1/$2.results.log"; } 2>/dev/null | awk '
        $1 == "RR-SOAK-MEM" { for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }; got = 1 }
        END { if (got) printf "%s, MemFree %+d kB", f["slab_most"], -f["memfree_down_kb"]; else printf "?" }'
}

# splats DIR: kernel log lines the tests fail on, in both consoles; a
# splat's "Call Trace:" is not counted apart from its headline.
splats() {
    cat "$1/client.console.log" "$1/server.console.log" 2>/dev/null |
        grep -aE "$BAD_LOG" | grep -avc 'Call Trace:' || true
}

KINDS="link nfsd sdev cdev umf"
table() {
    local pair d stalls run surv kind
    echo "soak: NFSv4.2 over RDMA (soft-RoCE, QEMU $VM_ACCEL, $VM_LINK link), per pair: $(cat "$RUN_DIR/config.txt" 2>/dev/null || echo '?')"
    echo "  stall: the longest I/O gap through a fault minus the fault's own length, seconds, median/worst"
    echo "  over the faults survived (I/O moved within the bound); replayed: removes that found their file gone"
    echo "  during an nfsd restart (NFS4ERR_NOENT, not in failed RPCs); leaks: 0, or the end (cli, srv) whose check failed"
    printf '%-6s %-11s %-11s %6s %8s %14s %11s %11s %8s %6s %8s %4s\n' \
        pair client server faults survived "stall med/max" "data errors" "failed RPCs" replayed splats leaks deaf
    for pair in c-c rs-c c-rs rs-rs; do
        d=$RUN_DIR/soak-$pair
        [ -d "$d" ] || continue
        mapfile -t stalls < <(faults_of "$d" | awk '$5 == 1 { print $4 }')
        run=$(faults_of "$d" | grep -c . || true)
        surv=$(faults_of "$d" | awk '$5 == 1' | grep -c . || true)
        read -r med _ worst _ < <(stats "${stalls[@]}")
        med=$(one_decimal "$med") worst=$(one_decimal "$worst")
        printf '%-6s %-11s %-11s %6s %8s %14s %11s %11s %8s %6s %8s %4s\n' "$pair" \
            "$(mod_name "${pair%-*}")" "$(mod_name "${pair#*-}")" "$run/$(sum_field "$d" faults)" "$surv" \
            "$med/$worst" "$(sum_field "$d" dataerr)" "$(sum_field "$d" ioerr)" "$(sum_field "$d" replayed)" "$(splats "$d")" "$(leaks "$d")" \
            "$(faults_of "$d" link | awk '$5 == 0 && /server-gsi=[A-Z]/ && !/server-gsi=RTS/' | grep -c . || true)"
    done
    echo "stall by fault kind, seconds: median/worst (survived/run); link: server link outage, nfsd: restart,"
    echo "  sdev/cdev: server/client rxe device removed for 10 s, umf: umount -f of a second, busy mount"
    printf '%-6s' pair; for kind in $KINDS; do printf ' %18s' "$kind"; done; echo
    for pair in c-c rs-c c-rs rs-rs; do
        d=$RUN_DIR/soak-$pair
        [ -d "$d" ] || continue
        printf '%-6s' "$pair"
        for kind in $KINDS; do
            mapfile -t stalls < <(faults_of "$d" "$kind" | awk '$5 == 1 { print $4 }')
            run=$(faults_of "$d" "$kind" | grep -c . || true)
            read -r med _ worst surv < <(stats "${stalls[@]}")
            med=$(one_decimal "$med") worst=$(one_decimal "$worst")
            printf ' %18s' "$med/$worst ($surv/$run)"
        done
        echo
    done
    # Recalls ride along; counted, not judged.
    for pair in c-c rs-c c-rs rs-rs; do
        d=$RUN_DIR/soak-$pair
        [ ! -d "$d" ] || echo "  $pair: delegations recalled $(sum_field "$d" recalls) (with a delegation/asked)"
    done
    # Memory: reported beside C/C's, not judged (nfsd's and the NFS
    # client's own leftovers count in it too).
    echo "memory at the end against before the transport loaded (caches dropped): the three kmalloc"
    echo "  caches that grew most (objects), and MemFree's change"
    for pair in c-c rs-c c-rs rs-rs; do
        d=$RUN_DIR/soak-$pair
        [ ! -d "$d" ] || echo "  $pair: client $(mem_of "$d" client); server $(mem_of "$d" server)"
    done
}

table | tee "$RUN_DIR/table.txt"
echo "table in $RUN_DIR/table.txt; VM logs in $RUN_DIR/soak-*/"
[ -z "${t_start:-}" ] || printf 'total %d min %d s\n' $(((SECONDS - t_start) / 60)) $(((SECONDS - t_start) % 60))
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"

# The soak (scripts/soak.sh, issue 30): mixed I/O on an NFSv4.2 mount over
# RDMA for rr.soak's minutes while a shuffled schedule of faults runs,
# spread over the time; per fault, how long I/O stalled beyond the fault's
# own length. rr.soak=MINUTES,LINK,NFSD,SRV_DEVDEL,CLI_DEVDEL,UMOUNT_F,SEED,BOUND:
# LINK server link outages of 5-30 s (the host's QEMU set_link, server.sh
# link_loss), NFSD nfsd restarts, SRV_DEVDEL server rxe removals and
# re-adds (server.sh dev_del), CLI_DEVDEL the same on this client,
# UMOUNT_F forced unmounts of a second, busy mount. A fault is survived
# when I/O moves again within BOUND s of its end.
#
# The I/O, in the background: a streaming write, caches dropped, the file
# read back and compared byte for byte; small files created, checked and
# removed; every RECALL_EVERY s a delegation recalled (the server writes a
# file we hold open, server.sh recall_req). Each step that reached the
# server logs a progress event; the host's table comes from the RR-SOAK
# lines on the results port.
#
# The stall of a fault is measured on this clock alone: the longest gap
# between two progress events from the last one before the fault was
# asked for to the first one after we learned that it ended, minus the
# fault's own length (the server's clock is another VM's; ours is
# jiffies, which lags under host load: a gap can read shorter than the
# outage the host timed, and the stall is then 0). The server
# answers over HTTP (server.sh publish), which a stuck mount does not
# block.
# shellcheck shell=sh

. /scenario/nfs-mount.sh

set -- $(echo "${RR_SOAK:-}" | tr , ' ')
minutes=${1:-60} n_link=${2:-50} n_nfsd=${3:-10} n_sdev=${4:-5} n_cdev=${5:-5} n_umf=${6:-3}
seed=${7:-1} bound=${8:-180}
RECALL_EVERY=60
# Seconds a server or client rxe device stays deleted.
DEVDEL_SECS=10
EV=/tmp/soak.ev
# One line per nfsd restart: when it was asked for, when the server said
# it was done (ms since boot).
RESTARTS=/tmp/soak.restarts
STOP=/tmp/soak.stop
size=${RR_SIZE:-8}

# now: milliseconds since boot in NOW, to 10 ms; no fork (the loops call
# it for each step).
now() {
    read -r _up _ < /proc/uptime
    _cs=${_up#*.}
    NOW=$((${_up%.*} * 1000 + ${_cs#0} * 10))
}

# ev KIND [DETAIL]: one line of the event log: p (progress: an operation
# the server answered), ioerr (an error the application saw), dataerr
# (data read back differs), gone (a remove found its file gone: see
# replayed_removes).
ev() { now; echo "$NOW $*" >> $EV; }

stream_loop() {
    n=0
    while [ ! -e $STOP ]; do
        n=$((n + 1))
        if ! cp /tmp/data /mnt/soak/stream || ! sync; then
            ev ioerr "stream write, pass $n"; sleep 1; continue
        fi
        ev p
        echo 3 > /proc/sys/vm/drop_caches
        cmp -s /tmp/data /mnt/soak/stream
        case $? in
        0) ev p ;;
        1) ev dataerr "stream pass $n: $(cmp /tmp/data /mnt/soak/stream 2>&1 | head -n 1)" ;;
        *) ev ioerr "stream read, pass $n"; sleep 1 ;;
        esac
    done
}

# A create (OPEN) and a remove (REMOVE) each go to the server; the read
# between them checks what was written.
small_loop() {
    i=0
    mkdir -p /mnt/soak/small || ev ioerr "mkdir small"
    while [ ! -e $STOP ]; do
        i=$((i + 1)) f=/mnt/soak/small/f$((i % 64))
        if ! echo "$i" > "$f"; then ev ioerr "create $f"; sleep 1; continue; fi
        ev p
        got=
        read -r got < "$f" || { ev ioerr "read $f"; sleep 1; continue; }
        [ "$got" = "$i" ] || ev dataerr "$f reads '$got', not $i"
        if err=$(rm "$f" 2>&1); then
            ev p
        elif [ ! -e "$f" ] && [ -z "${err##*No such file or directory*}" ]; then
            ev gone "remove $f"
        else
            ev ioerr "remove $f: $err"; sleep 1
        fi
    done
}

# A file held open for reading gets a delegation (outside grace); the
# server's write to it recalls it. Counted, not checked: the recall
# scenarios check recalls; here they ride along with the faults.
recall_loop() {
    k=0 t=0
    while [ ! -e $STOP ]; do
        sleep 1
        t=$((t + 1))
        [ $t -ge $RECALL_EVERY ] || continue
        t=0 k=$((k + 1)) name=soak/deleg-$k
        echo x > "/mnt/$name" && exec 3< "/mnt/$name" || { ev ioerr "deleg file $k"; continue; }
        # A second open after a moment: the first may be refused a
        # delegation while the callback channel is being probed.
        sleep 2
        exec 3<&- && exec 3< "/mnt/$name"
        if server_ask /mnt/.recall 180 "write $name 1"; then
            echo "$answer" | grep -q 'delegs=[1-9]' && echo "recalled $answer" >> /tmp/soak.recalls ||
                echo "nodeleg $answer" >> /tmp/soak.recalls
        else
            echo "unanswered $k" >> /tmp/soak.recalls
        fi
        exec 3<&-
        rm -f "/mnt/$name"
    done
}

# spawn NAME FUNC: run FUNC in the background, off check's output (lib.sh
# console_bg); its pid in /tmp/NAME.pid.
spawn() {
    (exec > "/tmp/$1.log" 2>&1 < /dev/null; $2) &
    echo $! > "/tmp/$1.pid"
}

# last_progress_le MS: the time of the last progress event at or before
# MS (0 if none).
last_progress_le() { awk -v t="$1" '$2 == "p" && $1 <= t { l = $1 } END { print l + 0 }' $EV; }

# first_progress_after MS: the first progress event after MS, or nothing.
first_progress_after() { awk -v t="$1" '$2 == "p" && $1 > t { print $1; exit }' $EV; }

# max_gap FROM TO: the longest gap between consecutive progress events
# from FROM to TO (both progress times), in ms.
max_gap() {
    awk -v a="$1" -v b="$2" '$2 == "p" && $1 >= a && $1 <= b { if (p != "" && $1 - p > g) g = $1 - p; p = $1 }
        END { print g + 0 }' $EV
}

# server_fault KIND SECS ID: ask the server for fault KIND (server.sh
# fault_watch) through the mount, and wait for its answer over HTTP;
# FAULT_ANSWER holds it. The request is renamed into place, so that the
# server never reads it half written.
server_fault() {
    timeout -s KILL 60 sh -c "echo '$2 $3' > /mnt/.fault-$1.req && mv /mnt/.fault-$1.req /mnt/.fault-$1" ||
        { echo "request for fault $1 not written"; return 1; }
    # Not before the fault can have ended: each poll of a server whose
    # link is out waits for wget's connect.
    sleep "$2"
    t0=$(uptime_s)
    until FAULT_ANSWER=$(timeout -s KILL 10 wget -q -O - "http://$SERVER4:$STATUS_PORT/fault-$3" 2>/dev/null) &&
        [ -n "$FAULT_ANSWER" ]; do
        [ $(($(uptime_s) - t0)) -le $((bound + 120)) ] || { echo "no answer to fault $1 ($3)"; return 1; }
        sleep 1
    done
}

# cli_devdel SECS: delete our rxe device under the mount, add it back SECS
# s later. The delete returns once the transport released the device.
cli_devdel() {
    timeout -s KILL 120 rdma link delete rxe0 || { echo "rdma link delete rxe0: status $?"; return 1; }
    sleep "$1"
    rdma link add rxe0 type rxe netdev eth0
}

# umount_f: a second mount of the export (nosharecache: its own RPC
# client, so that the forced unmount's killed RPCs are its own), busy
# with a writer, unmounted with -f: umount must return (EBUSY is fine:
# the writer holds a file open), the writer must see its I/O end; then
# the mount goes and comes back.
umount_f() {
    mkdir -p /mnt2/soak2 || return 1
    (exec > /dev/null 2>&1 < /dev/null
        while [ ! -e /tmp/m2.stop ]; do dd if=/dev/zero of=/mnt2/soak2/busy bs=64k count=64; done) &
    wpid=$!
    # Busy: the writer has its file (polled, 60 s at most).
    i=0
    until [ -s /mnt2/soak2/busy ]; do
        i=$((i + 1)); [ $i -le 60 ] || { echo "no write on /mnt2 in 60 s"; touch /tmp/m2.stop; return 1; }
        sleep 1
    done
    now; t0=$NOW
    umount -f /mnt2 > /tmp/umount-f.log 2>&1 &
    upid=$!
    await_exit $upid 60 || { echo "umount -f /mnt2 did not return in 60 s"; touch /tmp/m2.stop; return 1; }
    wait $upid; urc=$?
    now; ums=$((NOW - t0))
    touch /tmp/m2.stop
    await_exit $wpid 120 || { echo "the writer on /mnt2 still runs 120 s after umount -f"; return 1; }
    rm -f /tmp/m2.stop
    i=0
    while grep -q " /mnt2 " /proc/mounts; do
        umount /mnt2 2>/dev/null && break
        i=$((i + 1)); [ $i -le 30 ] || { echo "/mnt2 still mounted 30 s after umount -f"; return 1; }
        sleep 1
    done
    note "umount -f of the busy /mnt2 returned in $ums ms, status $urc ($(tr '\n' ' ' < /tmp/umount-f.log))"
    mount2
}

mount2() {
    mkdir -p /mnt2 && mount -t nfs -o "$opts,nosharecache,retry=0" "$server:$export_path" /mnt2
}

# schedule: the faults in a shuffled order (seed), one "KIND SECS" a
# line; a link outage lasts 5-30 s.
schedule() {
    awk -v seed="$seed" -v l="$n_link" -v n="$n_nfsd" -v s="$n_sdev" -v c="$n_cdev" -v u="$n_umf" -v d=$DEVDEL_SECS '
        BEGIN {
            srand(seed)
            for (i = 0; i < l; i++) f[k++] = "link " int(5 + rand() * 26)
            for (i = 0; i < n; i++) f[k++] = "nfsd 5"
            for (i = 0; i < s; i++) f[k++] = "sdev " d
            for (i = 0; i < c; i++) f[k++] = "cdev " d
            for (i = 0; i < u; i++) f[k++] = "umf 0"
            for (i = k - 1; i > 0; i--) { j = int(rand() * (i + 1)); t = f[i]; f[i] = f[j]; f[j] = t }
            for (i = 0; i < k; i++) print f[i]
        }'
}

# one_fault ID KIND SECS: inject it, then wait for I/O to move again;
# one RR-SOAK-FAULT line. Fails when I/O did not resume within the bound
# (the rest of the schedule then cannot run).
one_fault() {
    id=$1 kind=$2 secs=$3
    now; t_req=$NOW
    rc=0 FAULT_ANSWER=
    case $kind in
    link) server_fault link "$secs" "$id" || rc=1 ;;
    nfsd) server_fault nfsd 0 "$id" || rc=1
        now; echo "$t_req $NOW" >> $RESTARTS ;;
    sdev) server_fault devdel "$secs" "$id" || rc=1 ;;
    cdev) out=$(cli_devdel "$secs" 2>&1) || { rc=1; echo "$out"; } ;;
    umf) out=$(umount_f 2>&1) || { rc=1; echo "$out"; }
        echo "$out" | grep '^==' ;;
    esac
    case $FAULT_ANSWER in "" | "done 0 "*) ;; *) rc=1 ;; esac
    now; t_end=$NOW
    # Until I/O moves after the fault's end (bound s at most).
    first=
    until first=$(first_progress_after $t_end) && [ -n "$first" ]; do
        now
        [ $((NOW - t_end)) -le $((bound * 1000)) ] || break
        sleep 1
    done
    gsi=
    if [ -z "$first" ]; then
        # Stuck: a deaf server (its GSI QP out of RTS) or the transport.
        gsi=$(timeout -s KILL 10 wget -q -O - "http://$SERVER4:$STATUS_PORT/gsi" 2>/dev/null)
        echo "RR-SOAK-FAULT $id $kind $secs - 0 rc=$rc server-gsi=${gsi%% *}" > "$RESULTS"
        note "fault $id $kind ${secs}s: no I/O within $bound s of its end (server GSI QP: ${gsi:-unknown}; server said: ${FAULT_ANSWER:-nothing})"
        console_bg stuck_log
        return 1
    fi
    gap=$(max_gap "$(last_progress_le $t_req)" "$first")
    stall=$(awk -v g="$gap" -v s="$secs" 'BEGIN { x = g / 1000 - s; printf "%.1f", (x > 0 ? x : 0) }')
    echo "RR-SOAK-FAULT $id $kind $secs $stall 1 rc=$rc" > "$RESULTS"
    note "fault $id $kind ${secs}s: longest I/O gap $gap ms, stall $stall s beyond the fault; ${FAULT_ANSWER:-}"
}

# replayed_removes: how many removes found their file gone while an nfsd
# restart was under way (from its request to 60 s after nfsd was back);
# each other one becomes an I/O error in the event log. The server
# removed the file and stopped before its reply got out; the client sent
# the REMOVE again to an nfsd with no record of it (no reply cache outlives
# nfsd) and got NFS4ERR_NOENT. Any NFS client over any transport sees
# that; the C pair does too.
replayed_removes() {
    grep ' gone ' $EV > /tmp/soak.gone
    n=0
    while read -r t _ what; do
        if awk -v t="$t" '$1 <= t && t <= $2 + 60000 { f = 1 } END { exit !f }' $RESTARTS 2>/dev/null; then
            n=$((n + 1))
        else
            echo "$t ioerr $what: gone, with no nfsd restart under way" >> $EV
        fi
    done < /tmp/soak.gone
    echo $n
}

# faults: the schedule, fault k at k x (the run / (faults + 1)) s or,
# behind schedule, 10 s after the previous one's recovery.
faults() {
    schedule > /tmp/soak.schedule
    total=$(wc -l < /tmp/soak.schedule)
    note "soak: $minutes min, $total faults: $(cut -d' ' -f1 /tmp/soak.schedule | sort | uniq -c | tr -s ' \n' '  ')"
    [ "$total" -gt 0 ] || return 0
    step=$((minutes * 60 / (total + 1)))
    k=0
    # fd 4: a command in the loop that reads its stdin must not eat the
    # schedule.
    while read -r kind secs <&4; do
        k=$((k + 1))
        at=$((T0 + k * step))
        while [ "$(uptime_s)" -lt "$at" ]; do sleep 1; done
        one_fault "$k" "$kind" "$secs" || { echo "fault $k ($kind) not survived: schedule stopped"; return 1; }
        sleep 10
    done 4< /tmp/soak.schedule
}

# no_client_leak: with the mounts gone, the RDMA resources back to their
# counts from before the transport loaded (60 s at most), and the module
# unloads.
no_client_leak() {
    rdma_back "$BASE_RDMA" 60 || return 1
    case ${RR_MOD:-c} in
    c) unload rpcrdma ;;
    rs) unload rpcrdma_rs ;;
    esac
}

check client_net net_up 192.0.2.2 2001:db8::2 &&
    BASE_RDMA=$(rdma_counts) &&
    counts_snapshot > /tmp/mem.base &&
    check client_transport load_transport "${RR_MOD:-c}" &&
    check mount nfs_mount &&
    check mount2 mount2 &&
    check make_data dd if=/dev/urandom of=/tmp/data bs=1M count="$size" &&
    check soak_dir mkdir -p /mnt/soak || finish
: > $EV
T0=$(uptime_s)
spawn stream stream_loop
spawn small small_loop
spawn recall recall_loop
check faults_survived faults
ran=$?
# The rest of the run's time, faults or not.
while [ "$(uptime_s)" -lt $((T0 + minutes * 60)) ] && [ $ran -eq 0 ]; do sleep 5; done
touch $STOP
# A loop on a mount that never came back stays blocked: not waited for.
w=300
[ $ran -eq 0 ] || w=10
for l in stream small recall; do
    await_exit "$(cat /tmp/$l.pid)" $w || note "$l loop still running $w s after the stop"
done
replayed=$(replayed_removes)
ioerr=$(grep -c ' ioerr' $EV) dataerr=$(grep -c ' dataerr' $EV) prog=$(grep -c ' p$' $EV)
grep -E ' (ioerr|dataerr)' $EV | head -n 20 | sed 's/^/== /'
recalled=$(grep -c '^recalled' /tmp/soak.recalls 2>/dev/null) asked=$(wc -l < /tmp/soak.recalls 2>/dev/null)
echo "RR-SOAK-SUM faults=$(wc -l < /tmp/soak.schedule) ioerr=$ioerr dataerr=$dataerr progress=$prog recalls=${recalled:-0}/${asked:-0} replayed=$replayed" > "$RESULTS"
note "soak: $prog progress events, $ioerr I/O errors, $dataerr data errors, $replayed removes replayed across an nfsd restart, ${recalled:-0} of ${asked:-0} recalls with a delegation"
check no_data_errors [ "$dataerr" -eq 0 ]
check no_io_errors [ "$ioerr" -eq 0 ]
[ $ran -eq 0 ] || finish
grep -A 1 "xprt:" /proc/self/mountstats
check cleanup rm -rf /mnt/soak
check umount2 umount /mnt2
# The server unloads its transport once we are gone (server.sh teardown).
check teardown_request sh -c 'timeout -s KILL 120 touch /mnt/.teardown && timeout -s KILL 120 umount /mnt'
asked=$?
check client_no_leak no_client_leak
# Memory against before the transport loaded, once it is gone (the
# table prints both ends', beside the C/C pair's).
counts_snapshot > /tmp/mem.end &&
    echo "RR-SOAK-MEM $(mem_growth /tmp/mem.base /tmp/mem.end)" > "$RESULTS"
[ $asked -ne 0 ] || check server_teardown_done await_server teardown 300

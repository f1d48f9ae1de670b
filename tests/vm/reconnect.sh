# Reconnect under I/O: for each fault in RR_FAULTS (nfsd: the server
# restarts nfsd; link: the host pulls the server's cable for 20 s) we write
# while it is in effect; the transport must reconnect by itself, the data
# must read back intact, and mountstats must count the reconnect.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
size=${RR_SIZE:-16}

# xprt: rdma <srcport> <bind_count> <connect_count> ...
connects() { awk '$1 == "xprt:" { print $5; exit }' /proc/self/mountstats; }

# The client's view while the link is out, as server.sh's link_state_log.
link_state_log() {
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 15
        echo "== client link state at $(cut -d' ' -f1 /proc/uptime)"
        $IP neigh show dev eth0
        $IP -s link show eth0
        rdma resource show cm_id
        rdma statistic show link rxe0/1
    done
}

passes() { grep -c '^ok ' /tmp/io.rounds; }

# write_through_fault NAME: trigger fault NAME on the server while a loop
# writes, reads back and compares a file, pass after pass. The loop runs
# from before the request until two passes after the server said the
# fault is over (.fault-NAME.done), so that I/O meets the fault by
# construction: a write that merely follows a fixed wait could finish
# before a slow server injected it, and no reconnect would be counted.
write_through_fault() {
    before=$(connects)
    rm -f /tmp/io.stop && : > /tmp/io.rounds || return 1
    # An existing file, read after each open (close-to-open), shows the
    # server's answer at once.
    : > "/mnt/.fault-$1.done" || return 1
    # Off check's output (lib.sh console_bg), or check waits for the loop.
    (exec > /tmp/io.log 2>&1 < /dev/null; compare_loop /tmp/data "/mnt/data-$1" /tmp/io.stop /tmp/io.rounds) &
    pid=$!
    echo go > "/mnt/.fault-$1" || { touch /tmp/io.stop; return 1; }
    [ "$1" = link ] && console_bg link_state_log
    t0=$(uptime_s)
    # A read of a mount that does not come back blocks (hard mount):
    # killed, so that the bound holds.
    until timeout -s KILL 15 grep -q done "/mnt/.fault-$1.done"; do
        [ $(($(uptime_s) - t0)) -le 240 ] || { touch /tmp/io.stop; echo "server not done after 240 s"; return 1; }
        sleep 1
    done
    t1=$(uptime_s) p=$(passes)
    until [ "$(passes)" -ge $((p + 2)) ]; do
        [ $(($(uptime_s) - t1)) -le 120 ] ||
            { touch /tmp/io.stop; echo "I/O did not resume: $(passes) passes, $p at the fault's end"; return 1; }
        sleep 1
    done
    touch /tmp/io.stop
    wait $pid
    after=$(connects)
    note "$1: server done after $((t1 - t0)) s ($(cat "/mnt/.fault-$1.done")), $(passes) passes ($p by then), connect count $before -> $after"
    if grep '^fail' /tmp/io.rounds; then cat /tmp/io.log; return 1; fi
    grep -q "done 0" "/mnt/.fault-$1.done" || { echo "server: $(cat "/mnt/.fault-$1.done")"; return 1; }
    rm "/mnt/.fault-$1.done" && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data "/mnt/data-$1" || return 1
    [ "$after" -gt "$before" ]
}

# Connection events in the log: rpcrdma_rs's debug messages through
# dynamic debug (the C module has tracepoints instead).
debug_on() {
    [ "${RR_MOD:-c}" != rs ] && return 0
    ctl=/sys/kernel/debug/dynamic_debug/control
    dmesg -n 8 && echo 'module rpcrdma_rs +p' > $ctl || return 1
    grep 'rpcrdma_rs' $ctl | grep -q '=p' ||
        { grep -c . $ctl; grep rpcrdma $ctl; return 1; }
}

check client_net net_up 192.0.2.2 2001:db8::2 &&
    check client_transport load_transport "${RR_MOD:-c}" &&
    check client_debug debug_on &&
    check mount nfs_mount &&
    check make_data dd if=/dev/urandom of=/tmp/data bs=1M count="$size" &&
    for fault in ${RR_FAULTS:-nfsd link}; do
        check reconnect_after_$fault write_through_fault $fault || break
        check remove_$fault rm /mnt/data-$fault || break
    done
grep -A 1 "xprt:" /proc/self/mountstats
check umount umount /mnt

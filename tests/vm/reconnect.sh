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

# write_through_fault NAME: trigger fault NAME on the server, then write and
# verify a file while it is in effect.
write_through_fault() {
    before=$(connects)
    echo go > /mnt/.fault-$1 || return 1
    [ "$1" = link ] && console_bg link_state_log
    sleep 3
    cp /tmp/data /mnt/data-$1 && sync && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data /mnt/data-$1 || return 1
    after=$(connects)
    note "connect count $before -> $after"
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

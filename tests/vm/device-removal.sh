# Device removal under a mount: deleting the client's rxe device must make
# the transport let go of it (the delete returns), and once a device is back
# the same mount must carry I/O again.
# shellcheck shell=sh

. /scenario/nfs-mount.sh

remove_device() {
    echo before > /mnt/before && sync || return 1
    # ib_unregister_device waits for every user to release the device.
    timeout 60 rdma link delete rxe0
}

readd_device() {
    rdma link add rxe0 type rxe netdev eth0 &&
        dd if=/dev/urandom of=/tmp/data bs=1M count=4 2>/dev/null &&
        cp /tmp/data /mnt/after && sync && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data /mnt/after && [ "$(cat /mnt/before)" = before ]
}

check client_net net_up 192.0.2.2 2001:db8::2 &&
    check client_transport load_transport "${RR_MOD:-c}" &&
    check mount nfs_mount &&
    check device_removal_releases remove_device &&
    check io_after_device_returns readd_device &&
    check remove rm /mnt/before /mnt/after
grep -A 1 "xprt:" /proc/self/mountstats
check umount umount /mnt

# rpcrdma_rs only: a connect that fails after its QP exists (the MR pool
# allocation is made to fail through the fault_inject parameter) must
# release the half-built connection cleanly (the kernel log check catches a
# PD or CQ freed under its QP), and the mount must keep retrying until the
# fault is gone, then work.
connect_fault_mount() {
    f=/sys/module/rpcrdma_rs/parameters/fault_inject
    echo 1 > $f || return 1
    before=$(dmesg | grep -c "rpcrdma_rs: connect to .* failed")
    mount -t nfs -o "$opts,retry=0" "$server:$export_path" /mnt &
    pid=$!
    # Until two connects failed (counted, not timed: a slow machine
    # fails them later), the mount must keep retrying: every connect
    # fails while the fault is set, so it cannot have succeeded.
    t0=$(uptime_s)
    while :; do
        failed=$(($(dmesg | grep -c "rpcrdma_rs: connect to .* failed") - before))
        if ! kill -0 $pid 2>/dev/null; then
            echo "mount ended while every connect failed ($failed failures)"; echo 0 > $f; return 1
        fi
        [ "$failed" -lt 2 ] || break
        [ $(($(uptime_s) - t0)) -le 180 ] || { echo "$failed connect failures in 180 s"; echo 0 > $f; return 1; }
        sleep 1
    done
    kill -0 $pid 2>/dev/null || { echo "mount ended while every connect failed"; echo 0 > $f; return 1; }
    echo 0 > $f
    wait $pid || return 1
    note "mount retried through $failed failed connects"
    echo after-fault > /mnt/fault && sync && echo 3 > /proc/sys/vm/drop_caches &&
        [ "$(cat /mnt/fault)" = after-fault ] && rm /mnt/fault
}

# rpcrdma_rs only: a Reply whose MRs cannot be invalidated (posting its
# LOCAL_INVs is made to fail) must not complete its RPC while the server
# may still reach the memory: the transport reconnects, sunrpc sends the
# RPC again, and once the fault is gone the data reads back intact.
connects() { awk '$1 == "xprt:" { print $5; exit }' /proc/self/mountstats; }
linv_fault_io() {
    f=/sys/module/rpcrdma_rs/parameters/fault_inject
    dd if=/dev/urandom of=/tmp/big bs=1M count=8 2>/dev/null || return 1
    before=$(connects)
    echo 2 > $f || return 1
    # WRITEs send their data through Read chunks, whose MRs the client
    # invalidates itself (nfsd invalidates a Reply's only MR remotely, as
    # for most READs, but not these).
    (cp /tmp/big /mnt/big && sync) &
    pid=$!
    # Until the transport reconnected (counted, not timed: on a slow
    # machine the first WRITE may leave after any fixed wait). The write
    # cannot finish meanwhile: no Reply with MRs to invalidate can
    # complete while the fault is set.
    t0=$(uptime_s)
    until [ "$(connects)" -gt "$before" ]; do
        if ! kill -0 $pid 2>/dev/null; then
            [ "$(connects)" -le "$before" ] || break
            echo "the write ended with LOCAL_INV failing, no reconnect"; echo 0 > $f; wait $pid; return 1
        fi
        [ $(($(uptime_s) - t0)) -le 180 ] || { echo "no reconnect in 180 s"; echo 0 > $f; return 1; }
        sleep 1
    done
    echo 0 > $f
    wait $pid || return 1
    after=$(connects)
    note "connect count $before -> $after while LOCAL_INV posts failed"
    note "$(grep -m1 'xprt:' /proc/self/mountstats)"
    echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/big /mnt/big && [ "$after" -gt "$before" ] && rm /mnt/big
}

# rpcrdma_rs only: a QP that goes to the error state with no error
# completion and no CM event (rxe: a responder error, an RDMA Write or
# Read of the server that breaks an rkey rule) leaves only flushed
# completions. The transport must take them for the connection's end and
# reconnect at once, not post its Calls into the dead QP until their RPCs
# time out (timeo, 60 s here: the soak's stalls after link outages).
qp_error_io() {
    f=/sys/module/rpcrdma_rs/parameters/fault_inject
    before=$(connects)
    lost() { dmesg | grep -c 'QP is in the error state'; }
    lost0=$(lost)
    # Once: the next Call's Send finds its QP in the error state.
    echo 4 > $f || return 1
    t0=$(uptime_s)
    if ! { echo qp-error > /mnt/qp-error && sync; }; then echo 0 > $f; return 1; fi
    took=$(($(uptime_s) - t0))
    echo 0 > $f
    after=$(connects) lost1=$(lost)
    note "a write through a QP in the error state: $took s, connect count $before -> $after; $((lost1 - lost0)) connection(s) taken down for its flushes"
    echo 3 > /proc/sys/vm/drop_caches &&
        [ "$(cat /mnt/qp-error)" = qp-error ] && rm /mnt/qp-error || return 1
    [ "$after" -gt "$before" ] || { echo "no reconnect"; return 1; }
    # Not a time bound: the transport itself must have ended the
    # connection on the flushes, not sunrpc once the RPC timed out.
    [ "$lost1" -gt "$lost0" ] || { echo "the flushes ended nothing: the write waited $took s for its RPCs to time out"; return 1; }
}

if [ "${RR_MOD:-c}" = rs ]; then
    check connect_fault_mount_retries connect_fault_mount &&
        check linv_fault_rpc_resent linv_fault_io &&
        check qp_error_reconnects qp_error_io &&
        check umount_after_fault umount /mnt
fi

# Faults on the server's side under I/O, in one boot, against the server
# under test (server.sh fault_watch carries them out): nfsd's thread count
# changed (8 -> 2 -> 16 -> 8), nfsd's listeners removed and re-created
# (echo 0 > threads, then the portlist again), the server's link down for
# 20 s, nfsd restarted while the server's link drops the CM's messages
# (its GSI QP must survive: tests/vm/server.sh cm_send_lost), the server's
# rxe device deleted and added back; the last four must count a
# reconnect. A loop writes a file, drops the caches, reads it
# back and compares it, pass after pass, through each fault: every pass
# must compare, and the loop must go on by itself after the fault (two
# whole passes once the server said the fault is over). Then the server
# must unload its transport cleanly and be back to its RDMA resource
# counts (server.sh teardown; its results come on its own channel).
# With rr.bond=1, before the unload: nfsd's RDMA listener must keep
# listening through a bond failover (bond_failover). With rr.udlost=1,
# after it, the server checks that rxe loses a UD send whose source GID
# went rather than its QP (server.sh ud_send_lost, kernel patch 0003).
# shellcheck shell=sh

. /scenario/nfs-mount.sh
size=${RR_SIZE:-8}

# xprt: rdma <srcport> <bind_count> <connect_count> ...
connects() { awk '$1 == "xprt:" { print $5; exit }' /proc/self/mountstats; }
passes() { grep -c '^ok ' /tmp/io.rounds; }

# fault_under_io NAME SECS: start the I/O loop, ask the server for fault
# NAME once a pass went through, wait up to SECS s for the server's
# "done" (read through the mount, so it needs the mount back), then for
# two more passes; no pass may have failed.
fault_under_io() {
    rm -f /tmp/io.stop
    : > /tmp/io.rounds
    # An existing file, read after each open (close-to-open), shows the
    # server's answer at once; a new name could hide behind a cached
    # negative lookup.
    : > "/mnt/.fault-$1.done" || return 1
    # Not on check's output, which would wait for the loop to end; exec'd,
    # not a redirected function call, for which ash keeps a copy of that
    # pipe: a loop stuck on a dead mount held check until the scenario's
    # timeout (lib.sh console_bg).
    (exec > /tmp/io.log 2>&1 < /dev/null; compare_loop /tmp/data /mnt/io /tmp/io.stop /tmp/io.rounds) &
    pid=$!
    t0=$(uptime_s)
    until [ "$(passes)" -ge 1 ]; do
        [ $(($(uptime_s) - t0)) -le 60 ] || { touch /tmp/io.stop; echo "no I/O pass in 60 s"; return 1; }
        sleep 1
    done
    before=$(connects)
    t0=$(uptime_s)
    echo go > "/mnt/.fault-$1" || { touch /tmp/io.stop; return 1; }
    # A read of a mount that does not come back blocks (hard mount):
    # killed, so that the bound holds.
    until timeout -s KILL 15 grep -q done "/mnt/.fault-$1.done"; do
        [ $(($(uptime_s) - t0)) -le "$2" ] || { stuck "server not done after $2 s"; return 1; }
        sleep 1
    done
    t1=$(uptime_s) p=$(passes)
    until [ "$(passes)" -ge $((p + 2)) ]; do
        [ $(($(uptime_s) - t1)) -le 120 ] ||
            { stuck "I/O did not resume: $(passes) passes, $p at the fault's end"; return 1; }
        sleep 1
    done
    touch /tmp/io.stop
    wait $pid
    after=$(connects)
    note "$1: server done after $((t1 - t0)) s ($(cat "/mnt/.fault-$1.done")), $(passes) I/O passes ($p by then), connect count $before -> $after"
    if grep '^fail' /tmp/io.rounds; then cat /tmp/io.log; return 1; fi
    grep -q "done 0" "/mnt/.fault-$1.done" || { echo "server: $(cat "/mnt/.fault-$1.done")"; return 1; }
    if [ "${3:-}" = reconnect ] && [ "$after" -le "$before" ]; then
        echo "no reconnect counted: connect count $before -> $after"; return 1
    fi
    rm "/mnt/.fault-$1.done" /mnt/io
}

# stuck MSG: the mount did not come back: stop the I/O loop, log its
# state on the console and say MSG.
stuck() {
    touch /tmp/io.stop
    console_bg stuck_log
    echo "$1"
}

# bond_failover: the client unmounts, so that its next mount needs a new
# connection, and has the server (server.sh bond_failover) move onto a
# bond, bind nfsd's RDMA listener to its address and fail the bond over
# and back; then it mounts over RDMA again and writes and reads back.
# Before issue 27's fix the listener closed on the failover and no mount
# could get through.
bond_failover() {
    echo go > /mnt/.fault-bond && umount /mnt || return 1
    await_server bond 300 || return 1
    nfs_mount && transport_in_use &&
        cp /tmp/data /mnt/bond && sync && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data /mnt/bond && rm /mnt/bond
}

check client_net net_up 192.0.2.2 2001:db8::2 &&
    check client_transport load_transport "${RR_MOD:-c}" &&
    check mount nfs_mount &&
    check make_data dd if=/dev/urandom of=/tmp/data bs=1M count="$size" &&
    check io_through_thread_churn fault_under_io threads 60 &&
    check io_through_nfsd_restart fault_under_io nfsd 90 reconnect &&
    check io_through_link_loss fault_under_io link 120 reconnect &&
    check io_through_cm_message_lost fault_under_io cmloss 120 reconnect &&
    check io_through_device_removal fault_under_io devdel 240 reconnect &&
    { [ "${RR_BOND:-}" != 1 ] || check listener_through_bond_failover bond_failover; }
grep -A 1 "xprt:" /proc/self/mountstats
# Ask the server to unload its transport once we are gone, and wait until
# it did (it publishes when it is done).
check teardown_request sh -c 'timeout -s KILL 120 touch /mnt/.teardown && timeout -s KILL 120 umount /mnt'
asked=$?
case ${RR_MOD:-c} in
c)  check unload_transport unload rpcrdma ;;
rs) check unload_transport unload rpcrdma_rs ;;
esac
[ $asked -ne 0 ] || check server_teardown_done await_server teardown 300

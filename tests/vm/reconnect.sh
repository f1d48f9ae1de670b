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

# connect_trace start|stop: the transport's connects (rpcrdma.ko's trace
# events, which rpcrdma_rs emits too: xprtrdma_op_connect's delay, each
# connect's rc) into /tmp/connect.trace.
connect_trace() {
    if [ "$1" = start ]; then
        events_start xprtrdma_op_connect xprtrdma_connect
        return
    fi
    events_stop /tmp/connect.trace xprtrdma_op_connect xprtrdma_connect || return 1
    note "connects through the fault: $(sed 's/.* \(xprtrdma_[a-z_]*: \)/\1/' /tmp/connect.trace | tr '\n' ';')"
}

# guest_hz: the kernel's HZ, from its config (scripts/vm.sh).
guest_hz() {
    hz=$(cat /scenario/kernel-hz 2>/dev/null)
    [ "${hz:-0}" -gt 0 ] || { echo "HZ unknown" >&2; return 1; }
    echo "$hz"
}

# refused_paced: once the server refused a connect (nfsd down, its host
# up), the next connect starts half a second after the refused one began:
# not later (a backoff that doubled on each refusal reconnected up to one
# doubled delay after nfsd was back, where rpcrdma.ko asks no delay), and
# not sooner (sunrpc hands the connection to each waiting task in turn: a
# refusal retried at once is retried as fast as the server refuses). nfsd
# stays down for 5 s, so the client, writing all along, meets refusals.
refused_paced() {
    hz=$(guest_hz) || return 1
    awk -v hz="$hz" -v pace=0.5 '
        { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^xprtrdma_(op_)?connect:$/) { ts = $i; sub(/:$/, "", ts) } }
        / xprtrdma_op_connect: / {
            d = $0; sub(/.*delay=/, "", d); d += 0; start = ts + d / hz
            if (refused) {
                paced++
                if (d > pace * hz) { printf "delayed %d jiffies (%.2f s) after a refused connect\n", d, d / hz; bad = 1 }
                if (start - rstart < pace - 0.02) { printf "started again %.3f s after a refused connect began\n", start - rstart; bad = 1 }
            }
            refused = 0; last = start; next
        }
        / xprtrdma_connect: / && / rc=-111 / { refused = 1; rstart = last; n++ }
        END { if (!n) { print "no connect was refused"; exit 1 }
              printf "%d connects refused, %d retried after them (HZ %d)\n", n, paced, hz; exit bad }' /tmp/connect.trace
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
        [ $fault != nfsd ] || check connect_trace_start connect_trace start || break
        check reconnect_after_$fault write_through_fault $fault || break
        if [ $fault = nfsd ]; then
            check connect_trace_stop connect_trace stop &&
                check refused_connect_paced refused_paced || break
        fi
        check remove_$fault rm /mnt/data-$fault || break
    done
grep -A 1 "xprt:" /proc/self/mountstats
check umount umount /mnt

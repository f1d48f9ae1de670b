# Delegation recall over the backchannel (RFC 8167): the client holds a
# file open with a delegation, the server writes to it; nfsd sends
# CB_RECALL on the client's own RDMA connection, the client answers and
# returns the delegation, and the server's write completes within a
# second. Then 200 delegations recalled at once, and for each fault of
# rr.faults (link: the server's link out 20 s; nfsd: nfsd restarted, so
# the client makes a new session and sets its backchannel up again), one
# more recall once the client is back.
# The server side is recall_req in server.sh.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
many=${RR_FILES:-200}

# ask REQUEST: hand REQUEST to the server through /mnt/.recall and wait for
# its "done" line, which is left in $answer.
ask() {
    echo "$*" > /mnt/.recall || return 1
    i=0
    until answer=$(grep '^done' /mnt/.recall 2>/dev/null); do
        i=$((i + 1))
        [ $i -lt 180 ] || { echo "server did not answer '$*'"; return 1; }
        sleep 1
    done
    echo "== server: $* -> $answer"
}

# field NAME: the value of NAME=... in the server's answer.
field() { echo "$answer" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# DELEGRETURNs this client sent (its mountstats per-op line).
delegreturns() { awk '$1 == "DELEGRETURN:" { print $2; exit }' /proc/self/mountstats; }

# await_deleg NAME N: until the server lists N delegations on NAME. None
# is granted during the grace period (10 s from nfsd's start), so open
# again for a while.
await_deleg() {
    i=0
    while :; do
        ask count "$1" || return 1
        [ "$(field delegs)" -ge "$2" ] && return 0
        i=$((i + 1))
        [ $i -lt 10 ] || { echo "$(field delegs) of $2 delegations on $1"; return 1; }
        sleep 5
        reopen "$1"
    done
}

# reopen NAME: read every file of NAME (a file, or a directory), so the
# client asks for their delegations again.
reopen() {
    if [ -d "/mnt/$1" ]; then cat /mnt/"$1"/* > /dev/null; else cat "/mnt/$1" > /dev/null; fi
}

# recall NAME COUNT MS: the server writes to NAME (COUNT files at once);
# that must take less than MS ms, delegations must have been held and must
# all come back, counted on both sides, and the callback channel stay UP.
recall() {
    client_before=$(delegreturns)
    ask write "$1" "$2" || return 1
    ms=$(field ms) left=$(field left) returned=$(field delegreturn)
    client_returned=$(($(delegreturns) - client_before))
    note "recall $1 x$2: server write took $ms ms; $(field delegs) delegations," \
        "$left left, DELEGRETURN server $returned client $client_returned, callback $(field cb)"
    [ "$(field delegs)" -ge 1 ] || { echo "no delegation held when the server wrote"; return 1; }
    [ "$ms" -lt "$3" ] || { echo "conflicting write waited $ms ms"; return 1; }
    [ "$left" -eq 0 ] || { echo "$left delegations not returned"; return 1; }
    [ "$returned" -ge 1 ] && [ "$client_returned" -ge 1 ] ||
        { echo "DELEGRETURN not counted"; return 1; }
    cb_up "$1"
}

# cb_up NAME: the server's callback state for us must be UP, or become UP
# again within a minute: nfsd probes the channel afresh (state UNKNOWN)
# when a callback took longer than its timeout, which a flood of them
# under TCG can make happen with either client.
cb_up() {
    i=0
    until [ "$(field cb)" = UP ]; do
        i=$((i + 1))
        [ $i -le 12 ] || { echo "callback state '$(field cb)'"; return 1; }
        sleep 5
        ask count "$1" || return 1
    done
    [ $i -eq 0 ] || note "callback state UP again after $((i * 5)) s"
}

# One file held open while the server writes it.
one() {
    echo hello > /mnt/$1 || return 1
    sleep 600 < /mnt/$1 & holder=$!
    await_deleg "$1" 1 && recall "$1" 1 1000
    rc=$?
    kill $holder
    return $rc
}

# $many files, opened and closed (the client keeps their delegations),
# then all written on the server at once. nfsd may send their CB_RECALLs
# one at a time; each one lost costs a second or more (its timeout):
# 60 s for all, under TCG.
many_files() {
    mkdir /mnt/$1 || return 1
    i=1
    while [ $i -le "$many" ]; do
        echo "$i" > /mnt/$1/f$i || return 1
        i=$((i + 1))
    done
    reopen "$1"
    await_deleg "$1/" "$many" && recall "$1/" "$many" 60000
}

# The backchannel's own counters (rpcrdma_rs: debugfs, see the admin guide).
bc_counters() {
    [ "${RR_MOD:-c}" = rs ] || return 0
    mount -t debugfs none /sys/kernel/debug 2>/dev/null
    for f in /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_bc_*; do
        [ -e "$f" ] && echo "== $f: $(cat "$f")"
    done
    received=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_bc_calls_received | awk '{ s += $1 } END { print s + 0 }')
    replied=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_bc_replies_sent | awk '{ s += $1 } END { print s + 0 }')
    note "backchannel: $received calls received, $replied replies sent"
    [ "$received" -gt 0 ] && [ "$replied" -gt 0 ]
}

# fault NAME: have the server inject fault NAME (server.sh), then write
# through it: the transport reconnects by itself.
fault() {
    echo go > /mnt/.fault-$1 || return 1
    sleep 3
    echo after > /mnt/after-$1 && sync && [ "$(cat /mnt/after-$1)" = after ]
}

check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
if check mount nfs_mount; then
    check recall_one one recall-one
    check recall_many many_files recall-many
    for f in ${RR_FAULTS:-}; do
        check fault_$f fault $f && check recall_after_$f one recall-after-$f
    done
    check backchannel_counters bc_counters
    grep -A 3 "xprt:" /proc/self/mountstats
    grep -E "^ *(DELEGRETURN|OPEN):" /proc/self/mountstats
    check cleanup rm -rf /mnt/recall-* /mnt/after-* /mnt/.recall
    check umount umount /mnt
fi
case ${RR_MOD:-c} in
c)  check unload_transport unload rpcrdma ;;
rs) check unload_transport unload rpcrdma_rs ;;
esac

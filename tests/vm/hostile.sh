# Issue 11: a hostile RPC-over-RDMA server. The server VM runs
# rpcrdma-peer (tests/peer) instead of nfsd, one port per mode, each
# answering every Call with one kind of malformed reply; busybox httpd
# serves its log. The client mounts NFSv4.2 over RDMA against each port in
# turn: the mount must fail, and fail at once (EIO, as rpcrdma.ko) when the
# reply is malformed but its XID readable; no connection may carry no Call
# (rpcrdma.ko opens none); no oops (the host scans the console).
#
# short-MODE mounts against MODE with short timeouts (timeo=10, retrans=3:
# a major timeout after 4 s): against a server whose replies never complete
# an RPC, the client reconnects for each retransmission and backs off, and
# a reconnect still pending when the mount gives up must not open a
# connection for a transport that is being destroyed (defect 5).
#
# bcall answers like ok-null, but sends three backward Calls (RFC 8167)
# ahead of each Reply: one with a Write list, one filling the inline
# buffer, and a CB_NULL with no callback service to take it. The client
# must drop them (rpcrdma_rs: counted and logged) and go on with its
# forward RPCs as with ok-null.
#
# cant-reply answers each version 2 Call with RDMA2_ERR_CANT_REPLY naming
# the first segment and 24 bytes: rpcrdma_rs must send the Call again, same XID,
# with a Reply chunk, and fail the RPC (EIO) when that is refused too.
# cant-reply-unsized gives no segment nor length: nothing to act on, the
# RPC fails at once (issue 29).
#
# early answers like ok-null, and 300 ms after each Reply sends the same
# Reply for the next XID (sunrpc's XIDs count up), whose Call the
# client has not sent yet: rpcrdma_rs's fault_inject bit 3 (8) holds every
# Call for a second before it is marshalled, so the next RPC is waiting
# in the transport when that Reply comes. The client must drop it, as a
# Reply to no Call sent on that connection (xprtrdma_reply_rqst_err with
# its XID), and send the Call. Taking it would complete the RPC with an
# answer to a Call the server never had, and release the RPC's memory
# registrations while their REG_MRs may still wait in the Send Queue.
#
# rr.mod (client): c or rs. rr.modes=a,b,...: the modes to try (default all;
# write-huge only with rs: it oopses rpcrdma.ko in nfs_create_rpc_client;
# the cant-reply modes only with rs: rpcrdma.ko sends no version 2).
# shellcheck shell=sh

ALL_MODES="msgp badproc err-trunc err-unknown err-chunk zero-reply-chunk wrong-xid ok-null write-huge silent bcall cant-reply cant-reply-unsized early"
# Malformed replies with a readable XID: the RPC must fail with EIO at once.
FAST_MODES="msgp badproc err-trunc err-unknown err-chunk zero-reply-chunk cant-reply cant-reply-unsized"
PEER_BASE_PORT=20100
PEER_HTTP_PORT=8080
# timeo in deciseconds: a timed-out NULL ping takes timeo + timeo * retrans
# (20 s) per mount attempt, far above the 10 s a malformed reply may take.
LONG_TIMEO=100
LONG_RETRANS=1
FAST_LIMIT_MS=10000

# mode_port MODE: the peer's port for MODE.
mode_port() {
    _i=0
    for _m in $ALL_MODES; do
        _i=$((_i + 1))
        [ "$_m" != "$1" ] || { echo $((PEER_BASE_PORT + _i)); return 0; }
    done
    return 1
}

now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# --- server ---------------------------------------------------------------

# The peer opens rxe0 through libibverbs' rxe provider, as ibv_devices would.
peer_devices() {
    devs=$(rpcrdma-peer -l) || { echo "$devs"; return 1; }
    note "verbs devices: $devs"
    echo "$devs" | grep -qi '^rxe0: port 1 .*active'
}

peer_start() {
    mkdir -p /tmp/www && : > /tmp/www/peer.log || return 1
    args=
    for m in $ALL_MODES; do args="$args -p $(mode_port "$m"):$m"; done
    # Every line also goes to the host, as a note in server.results.log.
    # shellcheck disable=SC2086 # one word per option
    # Off check's output (as console_bg), or check waits for the peer to end.
    (exec > /dev/console 2>&1 < /dev/null; rpcrdma-peer $args 2>&1 | while IFS= read -r l; do
        echo "$(cut -d' ' -f1 /proc/uptime) $l" >> /tmp/www/peer.log
        echo "RR-NOTE peer: $l" > "$RESULTS"
    done) &
    httpd -p $PEER_HTTP_PORT -h /tmp/www > /dev/console 2>&1 < /dev/null || return 1
    i=0
    until [ "$(grep -c ' listening ' /tmp/www/peer.log)" -eq "$(echo $ALL_MODES | wc -w)" ]; do
        i=$((i + 1))
        [ $i -le 30 ] || { cat /tmp/www/peer.log; return 1; }
        sleep 1
    done
}

hostile_server() {
    check server_net net_up $SERVER4 $SERVER6 &&
        check server_verbs_device peer_devices &&
        check server_peer peer_start &&
        echo "RR-READY" > "$RESULTS"
    # The host powers us off once the client is done.
    while :; do sleep 60; done
}

# --- client ---------------------------------------------------------------

peer_log() { wget -q -O - "http://$SERVER4:$PEER_HTTP_PORT/peer.log"; }

# peer_conns MODE: "requests closed zero-call calls" for MODE's connections
# in the peer's log; a connection still open without a Call counts as
# zero-call too.
peer_conns() {
    peer_log | awk -v m="mode=$1" '
        $2 == "conn" && $4 == m {
            n = $3
            if ($5 == "call") calls[n]++
            else if ($5 != "established") closed[n] = 1
        }
        $2 == "conn" && $4 == "request" && $6 == m { req[$3] = 1 }
        END {
            for (n in req) {
                r++; c += calls[n]
                if (n in closed) cl++
                if (!calls[n]) z++
            }
            printf "%d %d %d %d\n", r, cl, z, c
        }'
}

# wait_closed MODE: until the peer saw every connection of MODE end (30 s).
wait_closed() {
    w=0
    # shellcheck disable=SC2046 # the four numbers
    while set -- "$1" $(peer_conns "$1") && [ "$3" -lt "$2" ]; do
        w=$((w + 1))
        [ $w -le 30 ] || return 1
        sleep 1
    done
}

# try_mount MODE TIMEO RETRANS LABEL: one mount against MODE's port; sets
# mount_rc, mount_ms and mount_out.
try_mount() {
    mkdir -p /mnt/$1
    t0=$(now_ms)
    mount_out=$(timeout -s KILL 180 mount -t nfs -o \
        "vers=4.2,proto=rdma,port=$(mode_port "$1"),retry=0,timeo=$2,retrans=$3" \
        "$SERVER4:/" "/mnt/$1" 2>&1)
    mount_rc=$?
    mount_ms=$(($(now_ms) - t0))
    if grep -q " /mnt/$1 " /proc/mounts; then umount -f "/mnt/$1"; fi
    note "$4: mount rc=$mount_rc in $mount_ms ms: $(echo "$mount_out" | tr '\n' ' ')"
}

mount_failed() { [ "$mount_rc" -ne 0 ] || { echo "mount succeeded"; return 1; }; }
failed_fast() {
    [ "$mount_ms" -le $FAST_LIMIT_MS ] || { echo "took $mount_ms ms (limit $FAST_LIMIT_MS)"; return 1; }
}
# transports_gone: until the transport module has no transport left (each
# holds a module reference until it is destroyed), 90 s at most.
transports_gone() {
    w=0
    until [ "$(cat /sys/module/$modname/refcnt)" = 0 ]; do
        w=$((w + 1))
        [ $w -le 90 ] || { echo "$modname still in use after 90 s"; return 1; }
        sleep 1
    done
    [ $w -eq 0 ] || note "transports gone after $w s"
}

# no_idle MODE "BEFORE": every connection MODE saw since peer_conns said
# BEFORE carried a Call. Counted once the client has destroyed its
# transports and the peer saw them all close.
no_idle() {
    transports_gone
    wait_closed "$1" || echo "some connections still open after 30 s"
    # shellcheck disable=SC2046 # the four numbers, then the four before
    set -- $(peer_conns "$1") $2
    set -- $(($1 - $5)) $(($2 - $6)) $(($3 - $7)) $(($4 - $8))
    note "connections: $1 opened, $2 closed, $3 without a call; $4 calls"
    [ "$3" -eq 0 ] || { echo "$3 of $1 connections carried no call"; return 1; }
}
# null_answered MODE: the client took the peer's reply to its NULL ping
# and went on with another procedure.
null_answered() {
    peer_log | grep "mode=$1 call " | grep -q ' proc=[1-9]' ||
        { peer_log | grep "mode=$1" | tail -n 3; return 1; }
}

# cant_reply_calls MODE N: the first Call MODE saw went N times under its
# XID, all version 2, the first without a Reply chunk and any other with
# one.
cant_reply_calls() {
    peer_log | grep " mode=$1 call " > /tmp/cr.calls
    x=$(head -n 1 /tmp/cr.calls | sed -n 's/.* xid=\(0x[0-9a-f]*\) .*/\1/p')
    grep " xid=$x " /tmp/cr.calls > /tmp/cr.xid
    n=$(grep -c . /tmp/cr.xid) v2=$(grep -c ' rdma_vers=2' /tmp/cr.xid) rc=$(grep -c ' reply-chunk$' /tmp/cr.xid)
    note "$1: xid $x sent $n times, $v2 as version 2, $rc with a Reply chunk"
    [ "$n" = "$2" ] && [ "$v2" = "$2" ] && [ "$rc" = $(($2 - 1)) ] &&
        ! head -n 1 /tmp/cr.xid | grep -q ' reply-chunk$' || { cat /tmp/cr.calls; return 1; }
}

# bcalls_dropped: rpcrdma_rs logged the backward Calls it dropped (the
# C client takes them for Replies to unknown XIDs).
bcalls_dropped() {
    [ "${RR_MOD:-c}" = rs ] || return 0
    peer_log | grep -q 'mode=bcall backward call' || { echo "peer sent no backward call"; return 1; }
    dmesg | grep -q 'backward call with chunks dropped' &&
        dmesg | grep -q 'backward call from .* dropped: NoService' ||
        { dmesg | grep rpcrdma_rs | tail -n 5; return 1; }
}

# fault_inject MASK: rpcrdma_rs's test faults (rpcrdma_rs only).
fault_inject() { echo "$1" > /sys/module/rpcrdma_rs/parameters/fault_inject; }

# early_refused: each early Reply whose Call the client sent after it
# (held back by fault_inject) was dropped as a Reply to no Call sent.
early_refused() {
    peer_log | sed -n 's/.* mode=early early-reply xid=\(0x[0-9a-f]*\)$/\1/p' | sort -u > /tmp/early.xids
    call_xids early > /tmp/early.calls
    lines_in /tmp/early.calls /tmp/early.xids > /tmp/early.sent
    [ -s /tmp/early.sent ] || { echo "no Call came after an early reply to it"; peer_log | grep mode=early | tail -n 5; return 1; }
    trace_field xprtrdma_reply_rqst_err xid | sort -u > /tmp/early.refused
    lines_in -v /tmp/early.refused /tmp/early.sent > /tmp/early.taken
    [ ! -s /tmp/early.taken ] ||
        { echo "early replies taken for Calls not sent: $(tr '\n' ' ' < /tmp/early.taken)"; return 1; }
    note "early replies refused: $(tr '\n' ' ' < /tmp/early.sent)"
}

# rr.mod=rs: each mode's mount is recorded through the rpcrdma trace
# events (lib.sh), and the client's decode events must name the XIDs and
# fields the peer sent.
# call_xids MODE: the XIDs of the Calls the peer logged for MODE.
call_xids() { peer_log | sed -n "s/.* mode=$1 call xid=\(0x[0-9a-f]*\) .*/\1/p" | sort -u; }

# xids_in EVENT FILE: EVENT fired, each time with an XID of FILE's.
xids_in() {
    trace_field "$1" xid | sort -u > /tmp/ev.xids
    [ -s /tmp/ev.xids ] || { echo "$1 never fired"; return 1; }
    lines_in -v "$2" /tmp/ev.xids > /tmp/ev.bad
    [ ! -s /tmp/ev.bad ] ||
        { echo "$1 with XIDs the peer never sent: $(head -n 3 /tmp/ev.bad | tr '\n' ' ')"; return 1; }
}

# all_field EVENT FIELD VALUE: every EVENT line has FIELD=VALUE.
all_field() {
    ! trace_field "$1" "$2" | grep -v -m1 -x "$3" > /tmp/ev.other ||
        { echo "$1 $2=$(cat /tmp/ev.other), the peer sent $3"; return 1; }
}

# none_fired EVENT...: no EVENT line.
none_fired() {
    for e in "$@"; do
        [ "$(trace_count "$e")" -eq 0 ] || { echo "$(head -n 1 "$TRACE_DIR/$e")"; return 1; }
    done
}

# hdr_err PROC: each Reply failed its Call as xprtrdma_reply_hdr_err, with
# the Call's XID, version 1 and procedure PROC.
hdr_err() {
    xids_in xprtrdma_reply_hdr_err /tmp/call.xids &&
        all_field xprtrdma_reply_hdr_err version 1 && all_field xprtrdma_reply_hdr_err proc "$1"
}

# decode_events T MODE: the events of mode T's mount (MODE without short-).
decode_events() {
    trace_stop || return 1
    call_xids "$2" > /tmp/call.xids
    case $1 in
    msgp | short-msgp) hdr_err 2 ;;
    badproc) hdr_err 7 ;;
    # As rpcrdma.ko: no error code, no xprtrdma_err_* event.
    err-trunc) hdr_err 4 && none_fired xprtrdma_err_chunk xprtrdma_err_unrecognized ;;
    err-unknown)
        xids_in xprtrdma_err_unrecognized /tmp/call.xids &&
            all_field xprtrdma_err_unrecognized procedure 99 && hdr_err 4 ;;
    err-chunk) xids_in xprtrdma_err_chunk /tmp/call.xids && hdr_err 4 ;;
    zero-reply-chunk) hdr_err 1 ;;
    # Version 2's errors are codes rpcrdma.ko's event does not know: the
    # error code (3, RDMA2_ERR_CANT_REPLY) as the procedure.
    cant-reply | cant-reply-unsized)
        xids_in xprtrdma_err_unrecognized /tmp/call.xids &&
            all_field xprtrdma_err_unrecognized procedure 3 ;;
    wrong-xid)
        while read -r x; do printf '0x%08x\n' $((x + 1)); done < /tmp/call.xids > /tmp/call1.xids
        xids_in xprtrdma_reply_rqst_err /tmp/call1.xids && all_field xprtrdma_reply_rqst_err proc 0 &&
            none_fired xprtrdma_reply_hdr_err ;;
    ok-null) none_fired xprtrdma_reply_hdr_err xprtrdma_reply_rqst_err ;;
    early) early_refused ;;
    # A backward Call with a Write list is no backward Call: rpcrdma.ko
    # looks its XID up as a Reply's. A CB_NULL that comes once the client
    # has its callback service (after its first COMPOUND) goes to it
    # (xprtrdma_cb_call), and is answered (xprtrdma_cb_reply) unless the
    # failed mount's connection went first.
    bcall)
        peer_log | sed -n 's/.* mode=bcall backward call xid=\(0x[0-9a-f]*\) .* write-list$/\1/p' |
            sort -u > /tmp/bcall.xids
        xids_in xprtrdma_reply_rqst_err /tmp/bcall.xids || return 1
        peer_log | sed -n 's/.* mode=bcall backward call xid=\(0x[0-9a-f]*\) .*/\1/p' | sort -u > /tmp/bc.xids
        trace_field xprtrdma_cb_call xid | sort -u > /tmp/cb_call.xids
        [ "$(trace_count xprtrdma_cb_call)" -eq 0 ] || xids_in xprtrdma_cb_call /tmp/bc.xids || return 1
        [ "$(trace_count xprtrdma_cb_reply)" -eq 0 ] || xids_in xprtrdma_cb_reply /tmp/cb_call.xids ;;
    esac || return 1
    # Our version 2 probe, which the peer refuses with ERR_VERS 1..1.
    if [ "$(trace_count xprtrdma_err_vers)" -gt 0 ]; then
        xids_in xprtrdma_err_vers /tmp/call.xids || return 1
        ! grep -v -m1 'versions=\[1, 1\]$' "$TRACE_DIR/xprtrdma_err_vers" ||
            { echo "ERR_VERS 1..1 traced otherwise"; return 1; }
        # check runs us in a subshell: counted in a file.
        trace_count xprtrdma_err_vers >> /tmp/probes.refused
    fi
    for e in xprtrdma_err_vers xprtrdma_err_chunk xprtrdma_err_unrecognized \
        xprtrdma_reply_hdr_err xprtrdma_reply_rqst_err; do
        [ "$(trace_count $e)" -eq 0 ] || trace_sample $e
    done
}

debug_on() {
    [ "${RR_MOD:-c}" = rs ] || return 0
    echo 'module rpcrdma_rs +p' > /sys/kernel/debug/dynamic_debug/control && dmesg -n 8
}

hostile_client() {
    # rr.modes: read here, so that the shared init (and with it the cached
    # base initramfs) stays as it is.
    RR_MODES=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^rr\.modes=//p' | tr , ' ')
    dflt="msgp badproc err-trunc err-unknown err-chunk zero-reply-chunk wrong-xid ok-null bcall"
    case ${RR_MOD:-c} in
    c) modname=rpcrdma ;;
    # The version 2 modes first: every other mode answers the version 2
    # probe ERR_VERS, and rpcrdma_rs then never probes 192.0.2.1 again.
    *) modname=rpcrdma_rs; dflt="cant-reply cant-reply-unsized $dflt write-huge early" ;;
    esac
    dflt="$dflt short-msgp short-silent"
    : > /tmp/probes.refused
    check client_net net_up 192.0.2.2 2001:db8::2 &&
        check client_transport load_transport "${RR_MOD:-c}" &&
        check client_debug debug_on &&
        check peer_reachable peer_log || return
    for t in ${RR_MODES:-$dflt}; do
        m=${t#short-}
        note "mode $t on port $(mode_port "$m")"
        before=$(peer_conns "$m")
        [ "$modname" != rpcrdma_rs ] || check "${t}_trace_start" trace_start
        [ "$t" != early ] || check early_hold_calls fault_inject 8
        case $t in
        short-*) try_mount "$m" 10 3 "$t" ;;
        *) try_mount "$m" $LONG_TIMEO $LONG_RETRANS "$t" ;;
        esac
        [ "$t" != early ] || check early_release_calls fault_inject 0
        [ "$modname" != rpcrdma_rs ] || check "${t}_decode_events" decode_events "$t" "$m"
        check "${t}_mount_fails" mount_failed
        case " $FAST_MODES " in
        *" $t "*) check "${t}_fails_within_10s" failed_fast ;;
        esac
        [ "$t" != ok-null ] || check ok-null_null_answered null_answered ok-null
        [ "$t" != cant-reply ] || check cant-reply_resent_once_with_reply_chunk cant_reply_calls cant-reply 2
        [ "$t" != cant-reply-unsized ] || check cant-reply-unsized_not_resent cant_reply_calls cant-reply-unsized 1
        if [ "$t" = bcall ]; then
            check bcall_forward_rpcs_go_on null_answered bcall
            check bcall_dropped bcalls_dropped
        fi
        check "${t}_no_idle_connections" no_idle "$m" "$before"
    done
    [ "$modname" != rpcrdma_rs ] || check version_probe_refused_traced \
        awk '{ n += $1 } END { if (n < 1) { print "xprtrdma_err_vers never fired"; exit 1 } }' /tmp/probes.refused
    check unload_transport unload $modname
}

case ${RR_ROLE:-} in
server) hostile_server ;;
*) hostile_client ;;
esac

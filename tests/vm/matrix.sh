# NFS over RDMA, every way a client mounts it, in one boot: NFSv4.2, v4.1
# and v3, each over IPv4 and over IPv6; with NFSv4.1 and 4.2 a delegation
# recalled over the backchannel too.
# Each mount writes a file, reads it back over the wire (after a remount)
# and compares it, creates and lists files, and unmounts.
# shellcheck shell=sh

size=${RR_SIZE:-16}
files=${RR_FILES:-200}

# mount_io VERS PROTO: the checks of one mount, named after it.
mount_io() {
    RR_VERS=$1 RR_PROTO=$2
    . /scenario/nfs-mount.sh
    . /scenario/deleg.sh
    tag=v$1-$2
    check "mount_$tag" nfs_mount || return
    check "transport_in_use_$tag" transport_in_use
    [ -z "${RR_SRV:-}" ] || check "rdma_version_$tag" rdma_version
    check "write_read_back_${size}MiB_$tag" write_read_back
    check "create_list_${files}_files_$tag" many_files
    # NFSv4.1 and 4.2 have delegations: one recalled over the backchannel
    # (tests/vm/deleg.sh; the server writes the file, which must finish
    # in under a second).
    [ "$1" = 3 ] || check "recall_$tag" one "recall-$tag"
    rm -f "/mnt/recall-$tag" /mnt/.recall
    check "umount_$tag" umount /mnt
}

# Over siw, every new connection's first Call is answered: 40 of them,
# each a NULL Call from rpcrdma-peer on a connection of its own, must come
# back under their XIDs. siw once left a Send that arrived right after its
# MPA reply in the socket until the next segment (the kernel patch
# scripts/kernel-patches/0002-*), so the first Call, an NFS client's
# version 2 probe, waited a retransmit timeout for its answer.
first_calls() {
    n=0 lost=0
    while [ $n -lt 40 ]; do
        n=$((n + 1))
        out=$(rpcrdma-peer -c $SERVER4 -t 60000 good-null 2>&1)
        echo "$out" | grep -q '^case good-null result=reply .* xid_ok=1 ' && continue
        lost=$((lost + 1))
        echo "$out" | grep -v '^case good-null start'
    done
    note "$n new connections over $RDMA_TYPE: $lost first Calls not answered at once"
    [ $lost -eq 0 ]
}

# Issue 29, with our client (rr.srv names the server): the mount's
# RPC-over-RDMA version, from its transport's debugfs rdma_version: 2 with
# our server, 1 with rpcrdma.ko's, which refuses the version 2 probe; the
# fallback costs no reconnect (the connect count of mountstats' xprt line
# stays 1) and no RPC (the mount and its I/O work).
rdma_version() {
    want=1
    [ "$RR_SRV" = rs ] && want=2
    mount -t debugfs none /sys/kernel/debug 2>/dev/null
    got=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_version 2>/dev/null | sort -u | tr '\n' ' ')
    connects=$(xprt_count 3)
    note "RPC-over-RDMA version(s) of the client's transports: ${got:-none} (want $want); connects $connects"
    [ "$got" = "$want " ] && [ "$connects" = 1 ]
}

# Issue 29: rpcrdma.ko's server is probed once per address (IPv4 and
# IPv6) in the whole boot, however many mounts and connections follow;
# ours never refuses.
probed_once() {
    n=$(dmesg | grep -c 'speaks RPC-over-RDMA version 1$')
    note "version 2 refused and version 1 settled $n times"
    if [ "$RR_SRV" = rs ]; then [ "$n" = 0 ]; else [ "$n" = 2 ]; fi
}

write_read_back() {
    dd if=/dev/urandom of=/tmp/data bs=1M count="$size" 2>/dev/null &&
        cp /tmp/data "/mnt/data-$tag" && sync &&
        umount /mnt && nfs_mount > /dev/null && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data "/mnt/data-$tag" && rm "/mnt/data-$tag"
}

many_files() {
    mkdir "/mnt/dir-$tag" || return 1
    i=0
    while [ $i -lt "$files" ]; do
        echo "$i" > "/mnt/dir-$tag/f$i" || return 1
        i=$((i + 1))
    done
    n=$(ls "/mnt/dir-$tag" | wc -l)
    [ "$n" -eq "$files" ] || { echo "listed $n of $files"; return 1; }
    [ "$(cat "/mnt/dir-$tag/f7")" = 7 ] && rm -r "/mnt/dir-$tag"
}

# Issue 28: rpcrdma.ko's sysctls, on both VMs, with the same expectations
# for either module on either side.
modname=rpcrdma
[ "${RR_MOD:-c}" = rs ] && modname=rpcrdma_rs

# xprt_count N: field N after "rdma" of /mnt's xprt line in mountstats
# (11 read chunks, 13 reply chunks; see the admin guide).
xprt_count() {
    awk -v n="$1" '$1 == "device" { cur = $5 } cur == "/mnt" && $1 == "xprt:" && $2 == "rdma" { print $(n + 2) }' /proc/self/mountstats
}

# inline_io NAME: on a new mount, a 2000-byte file written and its
# attributes fetched again; /tmp/counts-NAME gets the mount's read chunks
# and reply chunks afterwards. Then the file reads back and the mount goes.
inline_io() {
    nfs_mount > /dev/null || return 1
    head -c 2000 /dev/urandom > /tmp/small && cp /tmp/small "/mnt/small-$1" && sync &&
        echo 3 > /proc/sys/vm/drop_caches && stat "/mnt/small-$1" > /dev/null || return 1
    # The connection's RPC-over-RDMA version too (our client's debugfs;
    # rpcrdma.ko speaks only version 1).
    v=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_version 2>/dev/null | sort -u | xargs)
    echo "$(xprt_count 11) $(xprt_count 13) ${v:-1}" > "/tmp/counts-$1"
    cmp /tmp/small "/mnt/small-$1" && rm "/mnt/small-$1" && umount /mnt
}

# The client's inline thresholds from a sysctl.d file: with 1 KiB each
# way, a new mount sends the 2000-byte WRITE in a Read chunk and takes
# the Replies that may exceed 1 KiB (EXCHANGE_ID's among them) in Reply
# chunks; back at 4 KiB with sysctl -w, a new mount sends and receives
# them inline: fewer of both chunks for the same operations. That is
# rpcrdma.ko's meaning of the sysctls, on version 1: rpcrdma_rs is held to
# it with version 2 off (max_version=1) for the check. While it offers
# version 2, its Receives are 4096 bytes whatever rdma_max_inline_read
# says (a version 2 receiver MUST take 4096-byte messages inline,
# draft-cel-nfsv4-rpcrdma-version-two-02, 2.3; the admin guide says so),
# and a connection whose probe is lost falls back to version 1 with them.
inline_effect() {
    mv=/sys/module/rpcrdma_rs/parameters/max_version
    [ ! -e $mv ] || echo 1 > $mv || return 1
    inline_check
    rc=$?
    [ ! -e $mv ] || echo 2 > $mv || return 1
    return $rc
}
inline_check() {
    RR_VERS=4.2 RR_PROTO=rdma
    . /scenario/nfs-mount.sh
    printf 'sunrpc.rdma_max_inline_read = 1024\nsunrpc.rdma_max_inline_write = 1024\n' > /tmp/rdma.conf
    sysctl -p /tmp/rdma.conf || return 1
    inline_io small || return 1
    sysctl_set sunrpc.rdma_max_inline_read 4096 && sysctl_set sunrpc.rdma_max_inline_write 4096 || return 1
    inline_io default || return 1
    read -r rc_s pc_s v_s < /tmp/counts-small
    read -r rc_d pc_d v_d < /tmp/counts-default
    note "inline thresholds 1 KiB: read chunks $rc_s, reply chunks $pc_s (version $v_s); 4 KiB: $rc_d, $pc_d (version $v_d)"
    [ "$v_s" = 1 ] && [ "$v_d" = 1 ] || { echo "versions $v_s and $v_d, not 1"; return 1; }
    [ "$rc_s" -gt "$rc_d" ] && [ "$pc_s" -gt "$pc_d" ]
}

# sysctl_ask REQUEST: hand REQUEST to the server through /mnt/.sysctl
# (server.sh sysctl_req) and wait for its "done" line, left in $answer.
sysctl_ask() {
    server_ask /mnt/.sysctl 120 "$@" || return 1
    rm -f /mnt/.sysctl
    echo "server: $answer"
    [ "$(sfield "$answer" rc)" = 0 ]
}
sfield() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# The server grants svc_rdma.max_requests credits on the connections it
# accepts after a change: a new connection's NULL Call (rpcrdma-peer -c
# good-null) sees them in the Reply's header. What is checked is the
# grant, not how fast it comes: the peer waits up to 60 s for the
# answer (its default, 5 s, is for the hostile cases), and what it saw
# is shown when the grant is wrong.
server_credits() {
    for n in 20 128; do
        sysctl_ask set max_requests $n || return 1
        out=$(rpcrdma-peer -c $SERVER4 -t 60000 good-null 2>&1)
        got=$(echo "$out" | sed -n 's/^case good-null result=reply .* credits=\([0-9]*\) .*/\1/p')
        note "server svc_rdma.max_requests=$n: a new connection is granted ${got:-no} credits"
        [ "$got" = "$n" ] || { echo "$out" | grep -v '^case good-null start'; return 1; }
    done
}

# The server's rdma_stat_* counters: a write resets them (read and
# sq_starve to 0: nothing sends a Read chunk or fills the Send Queue
# meanwhile; recv and write below their count before, as our polling of
# the answer goes on); then 1 MiB written (NFS WRITEs in Read chunks) and
# read back (READs into Write chunks) must move recv, read and write.
server_counters() {
    sysctl_ask reset || return 1
    for c in read recv write sq_starve; do
        eval "r_$c=\$(sfield \"\$answer\" $c)"
    done
    [ "$r_read" = 0 ] && [ "$r_sq_starve" = 0 ] &&
        [ "$r_recv" -lt "$(sfield "$answer" before_recv)" ] &&
        [ "$r_write" -le "$(sfield "$answer" before_write)" ] ||
        { echo "counters not reset"; return 1; }
    dd if=/dev/urandom of=/tmp/ctr bs=1M count=1 2>/dev/null && cp /tmp/ctr /mnt/ctr && sync &&
        echo 3 > /proc/sys/vm/drop_caches && cmp /tmp/ctr /mnt/ctr && rm /mnt/ctr || return 1
    sysctl_ask stats || return 1
    note "server counters after 1 MiB written and read: $answer (after the reset: read=$r_read recv=$r_recv write=$r_write)"
    [ "$(sfield "$answer" recv)" -gt "$r_recv" ] && [ "$(sfield "$answer" read)" -gt "$r_read" ] &&
        [ "$(sfield "$answer" write)" -gt "$r_write" ]
}

# Issue 29: our server counts the version 2 Calls our client sends, and
# answers each in version 2.
server_v2_calls() {
    sysctl_ask stats || return 1
    calls=$(sfield "$answer" calls_v2) replies=$(sfield "$answer" replies_v2)
    note "server: ${calls:-no} version 2 Calls, ${replies:-no} version 2 Replies"
    [ "${calls:-0}" -gt 0 ] && [ "${replies:-0}" -gt 0 ]
}

# rr.wire=1: the RoCEv2 packets of one whole connection (CM handshake,
# mount, 64 KiB written and read back, unmount) captured by tcpdump and
# sent to the host, where tools/rdma-wire decodes them and asserts Calls
# and Replies, every message version 2 with our server (the callbacks'
# too) and version 1 with rpcrdma.ko's, nothing flagged (scripts/vm.sh
# vm_collect_wire). 1024-byte snapshots keep every header, not the data.
wire_capture() {
    RR_VERS=4.2 RR_PROTO=rdma
    . /scenario/nfs-mount.sh
    rm -f /tmp/wire.pcap
    tcpdump -i eth0 -p -Z root -U -s 1024 -c 1500 -w /tmp/wire.pcap udp port 4791 2> /tmp/tcpdump.err &
    tpid=$!
    i=0
    until grep -q "listening on" /tmp/tcpdump.err; do
        i=$((i + 1))
        [ $i -lt 20 ] && kill -0 $tpid 2> /dev/null || { cat /tmp/tcpdump.err; kill $tpid; return 1; }
        sleep 1
    done
    nfs_mount > /dev/null &&
        head -c 65536 /dev/urandom > /tmp/wire && cp /tmp/wire /mnt/wire && sync &&
        echo 3 > /proc/sys/vm/drop_caches && cmp /tmp/wire /mnt/wire && rm /mnt/wire &&
        umount /mnt
    rc=$?
    # The connection's last packets (DREQ, ACKs) after the unmount.
    sleep 2
    kill $tpid 2> /dev/null
    wait $tpid
    tail -n 3 /tmp/tcpdump.err
    [ $rc -eq 0 ] && [ -s /tmp/wire.pcap ] || return 1
    { echo "RR-PCAP mount-v4.2"; base64 /tmp/wire.pcap | sed 's/^/RR-B64 /'; echo "RR-PCAP-END"; } > "$RESULTS"
}

check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
check client_sysctl_tables sysctl_tables $modname
check client_sysctl_inline_thresholds inline_effect
[ "${RR_WIRE:-0}" = 1 ] && check wire_capture wire_capture
RR_VERS=4.2 RR_PROTO=rdma
. /scenario/nfs-mount.sh
if check sysctl_mount nfs_mount; then
    check server_sysctl_tables_asked sysctl_ask tables
    check server_sysctl_max_requests_credits server_credits
    [ "$RDMA_TYPE" != siw ] || check siw_first_calls_answered first_calls
    check server_sysctl_counters server_counters
    [ "${RR_SRV:-}" != rs ] || check server_version_2_calls server_v2_calls
    check sysctl_umount umount /mnt
fi
for m in 4.2:rdma 4.1:rdma 3:rdma 4.2:rdma6 4.1:rdma6 3:rdma6; do
    mount_io "${m%%:*}" "${m#*:}"
done
[ -z "${RR_SRV:-}" ] || check rdma_version_probed_once probed_once
# Ask the server to unload its transport once we are gone, and wait until
# it did (server.sh teardown; its results come on its own channel, and it
# publishes when it is done).
RR_VERS=4.2 RR_PROTO=rdma
. /scenario/nfs-mount.sh
check teardown_request sh -c 'mount -t nfs -o "$0,retry=0" "$1" /mnt && touch /mnt/.teardown && umount /mnt' "$opts" "$server:$export_path"
asked=$?
case ${RR_MOD:-c} in
c)  check unload_transport unload rpcrdma ;;
rs) check unload_transport unload rpcrdma_rs ;;
esac
[ $asked -ne 0 ] || check server_teardown_done await_server teardown 300

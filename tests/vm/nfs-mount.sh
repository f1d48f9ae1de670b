# Mount options and helpers for the client scenarios (sourced).
# RR_PROTO (rdma, rdma6, tcp) and RR_VERS (4.2, 4.1, 3) choose the mount.
# shellcheck shell=sh

proto=${RR_PROTO:-rdma}
vers=${RR_VERS:-4.2}

case $proto in
rdma6) server="[$SERVER6]" ;;
*)     server=$SERVER4 ;;
esac
case $proto in
rdma | rdma6) opts="vers=$vers,proto=$proto,port=$NFS_RDMA_PORT" ;;
*)            opts="vers=$vers,proto=$proto,port=$NFS_PORT" ;;
esac
mountproto=tcp
[ "$proto" = rdma6 ] && mountproto=tcp6
case $vers in
3) export_path=/export; opts="$opts,nolock,mountproto=$mountproto,mountport=$MOUNTD_PORT" ;;
*) export_path=/ ;;
esac

# The host starts us once nfsd listens; retry a little all the same.
nfs_mount() {
    i=0
    until mount -t nfs -o "$opts,retry=0" "$server:$export_path" /mnt; do
        i=$((i + 1))
        [ $i -lt 5 ] || return 1
        sleep 3
    done
    grep " /mnt " /proc/mounts
}

# With rr.rdma (siw, say), the connection must also be on that device.
transport_in_use() {
    want=$proto
    [ "$want" = rdma6 ] && want=rdma
    grep -q "proto=$proto" /proc/mounts &&
        grep -q "xprt:[[:space:]]*$want" /proc/self/mountstats || return 1
    [ -z "${RR_RDMA:-}" ] || [ "$want" != rdma ] || on_rdma_dev "$NFS_RDMA_PORT"
}

# compare_loop SRC DST STOP LOG: copy SRC to DST over the mount, drop the
# caches, read DST back over the wire and compare, round after round until
# the file STOP exists. LOG gets "ok N SECS" or "fail N SECS" per round
# (SECS since boot), then "stopped N".
compare_loop() {
    n=0
    while [ ! -e "$3" ]; do
        n=$((n + 1))
        if cp "$1" "$2" && sync && echo 3 > /proc/sys/vm/drop_caches && cmp "$1" "$2"; then
            echo "ok $n $(uptime_s)" >> "$4"
        else
            echo "fail $n $(uptime_s)" >> "$4"
        fi
    done
    echo "stopped $n" >> "$4"
}

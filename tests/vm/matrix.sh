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
    check "write_read_back_${size}MiB_$tag" write_read_back
    check "create_list_${files}_files_$tag" many_files
    # NFSv4.1 and 4.2 have delegations: one recalled over the backchannel
    # (tests/vm/deleg.sh; the server writes the file, which must finish
    # in under a second).
    [ "$1" = 3 ] || check "recall_$tag" one "recall-$tag"
    rm -f "/mnt/recall-$tag" /mnt/.recall
    check "umount_$tag" umount /mnt
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

check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
for m in 4.2:rdma 4.1:rdma 3:rdma 4.2:rdma6 4.1:rdma6 3:rdma6; do
    mount_io "${m%%:*}" "${m#*:}"
done
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

# Reconnect under I/O: the server restarts nfsd, then takes its link down for
# 20 s, each while we write; each time the transport must reconnect by itself
# and the data must read back intact. mountstats must count the reconnects.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
size=${RR_SIZE:-16}

# xprt: rdma <srcport> <bind_count> <connect_count> ...
connects() { awk '$1 == "xprt:" { print $5; exit }' /proc/self/mountstats; }

# write_through_fault NAME: trigger fault NAME on the server, then write and
# verify a file while it is in effect.
write_through_fault() {
    before=$(connects)
    echo go > /mnt/.fault-$1 || return 1
    sleep 3
    cp /tmp/data /mnt/data-$1 && sync && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data /mnt/data-$1 || return 1
    after=$(connects)
    echo "connect count $before -> $after"
    [ "$after" -gt "$before" ]
}

check client_net net_up 192.0.2.2 2001:db8::2 &&
    check client_transport load_transport "${RR_MOD:-c}" &&
    check mount nfs_mount &&
    check make_data dd if=/dev/urandom of=/tmp/data bs=1M count="$size" &&
    check reconnect_after_nfsd_restart write_through_fault nfsd &&
    check reconnect_after_link_down write_through_fault link &&
    check remove rm /mnt/data-nfsd /mnt/data-link
grep -A 1 "xprt:" /proc/self/mountstats
check umount umount /mnt

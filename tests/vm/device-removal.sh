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

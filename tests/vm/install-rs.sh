# install-rs: rpcrdma_rs installed in place of rpcrdma.ko the way the
# admin guide says (scripts/install.sh, what `make install` runs), in this
# VM and the server's (server.sh with rr.mod=install), and nothing loaded
# by hand. The server's rdma listener loaded rpcrdma_rs (server.sh
# checks); here mount -o proto=rdma must load it too, then carry real
# I/O compared byte for byte, and proto=rdma6 (another name, rpcrdma6)
# after an rmmod. Then both VMs uninstall: nfsd's next listener and our
# next mount must load rpcrdma.ko, which reads back the same file.
# shellcheck shell=sh

size=${RR_SIZE:-16}
. /scenario/nfs-mount.sh

# The file crosses the wire both ways: written, unmounted, mounted again
# with the caches dropped, compared.
write_compare() {
    dd if=/dev/urandom of=/tmp/data bs=1M count="$size" 2>/dev/null &&
        cp /tmp/data /mnt/data && sync &&
        umount /mnt && nfs_mount > /dev/null && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data /mnt/data
}

read_compare() { echo 3 > /proc/sys/vm/drop_caches && cmp /tmp/data /mnt/data; }

mount6() {
    mount -t nfs -o "vers=$vers,proto=rdma6,port=$NFS_RDMA_PORT,retry=0" "[$SERVER6]:/" /mnt &&
        grep -q " /mnt nfs4 .*proto=rdma6" /proc/mounts
}

check client_net net_up 192.0.2.2 2001:db8::2
check client_install load_transport install &&
    check mount_rdma nfs_mount &&
    check mount_rdma_loaded_rs serving rpcrdma_rs &&
    check transport_in_use transport_in_use &&
    check write_${size}MiB_read_back_compare write_compare &&
    grep -A 3 "xprt:" /proc/self/mountstats &&
    check umount umount /mnt &&
    check unload_rs unload rpcrdma_rs &&
    check mount_rdma6 mount6 &&
    check mount_rdma6_loaded_rs serving rpcrdma_rs &&
    check rdma6_read_compare read_compare &&
    # The server swaps to rpcrdma.ko once we have unmounted (server.sh
    # swap_to_c) and says so over HTTP.
    check ask_server_uninstall touch /mnt/.uninstall &&
    check umount_rdma6 umount /mnt &&
    check client_uninstall uninstall_module &&
    check unload_rs_after_uninstall unload rpcrdma_rs &&
    check server_uninstalled await_server uninstall 240 &&
    check mount_rdma_after_uninstall nfs_mount &&
    check mount_rdma_loaded_c serving rpcrdma &&
    check c_read_compare read_compare &&
    grep -A 3 "xprt:" /proc/self/mountstats &&
    check umount_c umount /mnt

# NFS server VM: nfsd with tcp 2049 and rdma 20049 listeners over a tmpfs
# export, then idle until the host ends the run.
# shellcheck shell=sh

nfsd_up() {
    mount -t tmpfs -o size=${RR_SIZE:-700}m tmpfs /export || return 1
    chmod 1777 /export
    mount -t nfsd nfsd /proc/fs/nfsd || return 1
    mount -t rpc_pipefs rpc_pipefs /var/lib/nfs/rpc_pipefs 2>/dev/null
    opts=rw,no_root_squash,insecure,no_subtree_check,fsid=0
    printf '/export 192.0.2.0/24(%s) 2001:db8::/64(%s)\n' "$opts" "$opts" > /etc/exports
    # Versions first: nfsd refuses the change once listeners exist.
    echo "+3 +4 +4.1 +4.2" > /proc/fs/nfsd/versions || return 1
    mkdir -p /run/rpcbind
    rpcbind || return 1
    exportfs -ra || return 1
    rpc.mountd || return 1
    echo 10 > /proc/fs/nfsd/nfsv4leasetime
    echo 10 > /proc/fs/nfsd/nfsv4gracetime
    echo "tcp 2049" > /proc/fs/nfsd/portlist || return 1
    if [ "$RR_MOD" != none ]; then
        echo "rdma 20049" > /proc/fs/nfsd/portlist || return 1
    fi
    echo 8 > /proc/fs/nfsd/threads || return 1
    note "nfsd listening: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
}

check server_net net_up $SERVER4 $SERVER6
check server_transport load_transport "${RR_MOD:-c}"
check server_nfsd nfsd_up
echo "RR-READY" > "$RESULTS"
# The host powers us off once the client is done.
while :; do sleep 3600; done

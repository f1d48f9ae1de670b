# NFS server VM: nfsd with tcp 2049 and rdma 20049 listeners over a tmpfs
# export, then idle until the host ends the run.
# shellcheck shell=sh

export_fs() {
    mount -t tmpfs -o size=${RR_SIZE:-700}m tmpfs /export && chmod 1777 /export &&
        mount -t nfsd nfsd /proc/fs/nfsd &&
        mount -t rpc_pipefs rpc_pipefs /var/lib/nfs/rpc_pipefs || return 1
    opts=rw,no_root_squash,insecure,no_subtree_check,fsid=0
    printf '/export 192.0.2.0/24(%s) 2001:db8::/64(%s)\n' "$opts" "$opts" > /etc/exports
    exportfs -ra
}

# Versions, lease and grace must be set before listeners and threads exist.
nfsd_tune() {
    echo "+3 +4 +4.1 +4.2" > /proc/fs/nfsd/versions &&
        echo 10 > /proc/fs/nfsd/nfsv4leasetime &&
        echo 10 > /proc/fs/nfsd/nfsv4gracetime
}

rpc_daemons() {
    mkdir -p /run/rpcbind && rpcbind && rpc.mountd
}

nfsd_listen() {
    echo "tcp 2049" > /proc/fs/nfsd/portlist || return 1
    if [ "${RR_MOD:-c}" != none ]; then
        echo "rdma 20049" > /proc/fs/nfsd/portlist || return 1
    fi
    echo 8 > /proc/fs/nfsd/threads || return 1
    note "nfsd listening: $(tr '\n' ' ' < /proc/fs/nfsd/portlist)"
}

check server_net net_up $SERVER4 $SERVER6 &&
    check server_transport load_transport "${RR_MOD:-c}" &&
    check server_export export_fs &&
    check server_nfsd_tune nfsd_tune &&
    check server_rpc_daemons rpc_daemons &&
    check server_nfsd_listen nfsd_listen &&
    echo "RR-READY" > "$RESULTS"
# The host powers us off once the client is done.
while :; do sleep 3600; done

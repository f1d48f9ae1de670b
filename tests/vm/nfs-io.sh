# NFS client workload: mount, write RR_SIZE MiB, read it back over the wire and
# compare, create and list RR_FILES files, rename and remove, unmount, unload.
# shellcheck shell=sh

size=${RR_SIZE:-64}
files=${RR_FILES:-1000}
. /scenario/nfs-mount.sh

write_file() {
    dd if=/dev/urandom of=/tmp/data bs=1M count="$size" 2>/dev/null &&
        cp /tmp/data /mnt/data && sync
}

# Unmount and mount again so the read-back really crosses the wire.
read_back() {
    umount /mnt && nfs_mount >/dev/null && echo 3 > /proc/sys/vm/drop_caches &&
        cmp /tmp/data /mnt/data
}

many_files() {
    mkdir /mnt/dir || return 1
    i=0
    while [ $i -lt "$files" ]; do
        echo "$i" > /mnt/dir/f$i || return 1
        i=$((i + 1))
    done
    n=$(ls /mnt/dir | wc -l)
    [ "$n" -eq "$files" ] || { echo "listed $n of $files"; return 1; }
}

rename_remove() {
    mv /mnt/dir /mnt/dir2 && [ "$(cat /mnt/dir2/f7)" = 7 ] &&
        rm -r /mnt/dir2 /mnt/data && [ -z "$(ls /mnt)" ]
}

# server_counters: ask the server to send its transport's counters to
# the host (server.sh xprtstats_report), while the mount's are still
# there to read beside them; 30 s at most.
server_counters() {
    echo req > /mnt/.xprtstats || return 1
    i=0
    until [ "$(cat /mnt/.xprtstats 2>/dev/null)" = done ]; do
        i=$((i + 1))
        [ $i -le 30 ] || { echo "the server did not answer in 30 s"; return 1; }
        sleep 1
    done
    rm -f /mnt/.xprtstats
}

check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
# rr.trace=1: the mount's I/O recorded through the rpcrdma events, filtered
# on rpcrdma.ko's field names.
[ -z "${RR_TRACE:-}" ] || check client_trace_start trace_start \
    'xprtrdma_marshal=xid != 0' 'xprtrdma_reply=xid != 0' \
    'xprtrdma_post_send=num_sge > 0' 'xprtrdma_wc_receive=status == 0' \
    'xprtrdma_mr_map=length > 0' 'xprtrdma_mr_fastreg=nents > 0' \
    'xprtrdma_mr_localinv=handle != 0' 'xprtrdma_mr_reminv=handle != 0' \
    'xprtrdma_mr_unmap=length > 0' 'xprtrdma_wc_li_done=completion_id >= 0' \
    'xprtrdma_wc_send=completion_id > 0' 'xprtrdma_wc_fastreg=vendor_err >= 0' \
    'xprtrdma_wc_li=cq_id >= 0' 'xprtrdma_frwr_alloc=rc < 0' 'xprtrdma_frwr_dereg=rc != 0' \
    'xprtrdma_frwr_sgerr=nents >= 0' 'xprtrdma_frwr_maperr=num_mapped >= 0' \
    'xprtrdma_inline_thresh=inline_send > 0' 'xprtrdma_post_recv=completion_id >= 0' \
    'xprtrdma_post_recvs=count > 0' 'xprtrdma_post_recvs_err=status != 0' \
    'xprtrdma_post_send_err=rc != 0' 'xprtrdma_prepsend_failed=ret < 0' \
    'xprtrdma_chunk_read=nents > 0' 'xprtrdma_chunk_write=length > 0' \
    'xprtrdma_chunk_reply=handle != 0' 'xprtrdma_chunk_wp=offset != 0' \
    'xprtrdma_decode_seg=handle != 0' 'xprtrdma_fixup=fixup > 0'
if check mount nfs_mount; then
    check transport_in_use transport_in_use
    check write_${size}MiB write_file
    check read_back_compare read_back
    check create_list_${files}_files many_files
    check rename_remove rename_remove
    if [ -n "${RR_TRACE:-}" ]; then
        check client_trace_stop trace_stop &&
            check client_trace_events trace_check_client
    fi
    check server_counters server_counters
    grep -A 3 "xprt:" /proc/self/mountstats
    check umount umount /mnt
fi
case ${RR_MOD:-c} in
c)  check unload_transport unload rpcrdma ;;
rs) check unload_transport unload rpcrdma_rs ;;
esac

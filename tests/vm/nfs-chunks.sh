# NFS client workload for every chunk type: a long symlink (its CREATE is a
# Long Call: Position Zero Read chunk), READLINK (Write chunk, less written
# than offered), a file of odd length (Read chunks; Write chunks trimmed at
# EOF), a directory listing (Reply or Write chunk). Run with
# rr.modparams=max_inline_read=1024,max_inline_write=1024 so small messages
# need chunks too.
# shellcheck shell=sh

. /scenario/nfs-mount.sh

target=
i=0
while [ $i -lt 300 ]; do
    target="${target}segment-$i/"
    i=$((i + 1))
done

odd_file() {
    dd if=/dev/urandom of=/tmp/odd bs=1001 count=3001 2>/dev/null &&
        cp /tmp/odd /mnt/odd && sync
}

long_symlink() {
    ln -s "$target" /mnt/link
}

remount() {
    umount /mnt && nfs_mount >/dev/null && echo 3 > /proc/sys/vm/drop_caches
}

check_back() {
    [ "$(readlink /mnt/link)" = "$target" ] || { echo "symlink differs"; return 1; }
    cmp /tmp/odd /mnt/odd
}

listing() {
    mkdir /mnt/d || return 1
    i=0
    while [ $i -lt 100 ]; do
        : > "/mnt/d/a-rather-long-file-name-to-fill-the-readdir-reply-$i" || return 1
        i=$((i + 1))
    done
    remount || return 1
    n=$(ls /mnt/d | wc -l)
    [ "$n" -eq 100 ] || { echo "listed $n"; return 1; }
}

# Two names of 255 bytes: a RENAME Call too long for 1 KiB inline and
# without pages, so a Long Call (RDMA_NOMSG, Position Zero Read chunk).
# The 64-byte host name (in every AUTH_SYS credential) tips it over.
long_rename() {
    a=$(printf '%0255d' 1) b=$(printf '%0255d' 2)
    : > "/mnt/$a" && mv "/mnt/$a" "/mnt/$b" && [ -e "/mnt/$b" ] && rm "/mnt/$b"
}

# The 21st field after "rdma" in mountstats: Calls sent as RDMA_NOMSG.
nomsg_calls() { awk '$1 == "xprt:" && $2 == "rdma" { print $23; exit }' /proc/self/mountstats; }

long_call_was_nomsg() {
    n=$(nomsg_calls)
    echo "RDMA_NOMSG calls: $n"
    [ "${n:-0}" -gt 0 ]
}

# With slot_table_entries=4 (rs-long-calls), eight direct writers at once
# need more request slots than the transport has: the others wait on its
# backlog and get a slot as one is freed. Each file must compare, and the
# xprt line must count the waits (bklog_u, the 10th field after "rdma")
# and the request buffers the slots allocated (hardway_register_count,
# the 18th).
xprt_field() { awk -v f="$1" '$1 == "xprt:" && $2 == "rdma" { print $(f + 2); exit }' /proc/self/mountstats; }

parallel_writers() {
    dd if=/dev/urandom of=/tmp/par bs=64k count=32 2>/dev/null || return 1
    i=0
    while [ $i -lt 8 ]; do
        dd if=/tmp/par of="/mnt/par-$i" bs=64k oflag=direct 2>/dev/null &
        i=$((i + 1))
    done
    wait
}

slots_waited() {
    echo "backlog $(xprt_field 10), buffer bytes allocated $(xprt_field 18)"
    [ "$(xprt_field 10)" -gt 0 ] && [ "$(xprt_field 18)" -gt 0 ]
}

parallel_read_back() {
    remount || return 1
    i=0
    while [ $i -lt 8 ]; do
        cmp /tmp/par "/mnt/par-$i" || return 1
        rm "/mnt/par-$i" || return 1
        i=$((i + 1))
    done
}

cleanup() {
    rm -r /mnt/d /mnt/odd /mnt/link && [ -z "$(ls /mnt)" ]
}

check client_net net_up 192.0.2.2 2001:db8::2
printf '%064d' 0 > /proc/sys/kernel/hostname
check client_transport load_transport "${RR_MOD:-c}"
if check mount nfs_mount; then
    check odd_file odd_file
    check long_symlink long_symlink
    check long_rename long_rename
    check long_call_was_nomsg long_call_was_nomsg
    grep -E "opts:|xprt:" /proc/self/mountstats
    check remount remount
    check read_back check_back
    grep -E "xprt:" /proc/self/mountstats
    check listing listing
    grep -E "xprt:" /proc/self/mountstats
    case ${RR_MODPARAMS:-} in
    *slot_table_entries=4*)
        check parallel_writers parallel_writers
        check slots_waited slots_waited
        check parallel_read_back parallel_read_back
        ;;
    esac
    check cleanup cleanup
    check umount umount /mnt
fi
case ${RR_MOD:-c} in
c)  check unload_transport unload rpcrdma ;;
rs) check unload_transport unload rpcrdma_rs ;;
esac

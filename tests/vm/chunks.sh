# Issue 5, large transfers: everything that cannot travel inline must come
# through Read, Write or Reply chunks and arrive intact. With rsize and wsize
# of 1 MiB: a sweep of file sizes around the inline and page boundaries, one
# big file (RR_BIGSIZE MiB, 0 skips it), a directory of RR_DIRSIZE entries
# (long READDIR replies), long symlink targets, user xattrs up to 60000
# bytes (NFSv4.2) and a POSIX ACL of 320 entries (NFSv3; from about 340 on,
# SETACL fails with EIO over TCP as well). Then the transport's counters
# must show each kind of chunk, every MR must be released after umount, and
# the module must unload.
#
# RR_MODPARAMS (see load_transport) sets the inline thresholds; with
# max_inline_write below 2000 a 2000-byte WRITE must go in a Read chunk,
# otherwise inline.
# shellcheck shell=sh disable=SC2154 # proto and server: nfs-mount.sh

. /scenario/nfs-mount.sh
opts="$opts,rsize=1048576,wsize=1048576"
big=${RR_BIGSIZE:-0}
dirsize=${RR_DIRSIZE:-5000}
mod=${RR_MOD:-c}
modname=rpcrdma
[ "$mod" = rs ] && modname=rpcrdma_rs
# Sizes around the inline thresholds, the page size and rsize/wsize.
SWEEP="1 1023 3000 4097 65536 1048583 8388608 67108864"
SYMLINKS="900 1000 4000"
XATTRS="1000 3900 60000"
ACL_ENTRIES=320
max_inline_write=4096
for kv in $(echo "${RR_MODPARAMS:-}" | tr , ' '); do
    case $kv in max_inline_write=*) max_inline_write=${kv#*=} ;; esac
done

# MRs the client's RDMA device holds ("0: rxe0: pd 1 cq 2 qp 1 cm_id 1 mr 0 ...").
mr_count() {
    rdma resource show | awk -v dev="$RDMA_DEV:" '$2 == dev { for (i = 3; i < NF; i++) if ($i == "mr") print $(i + 1) }'
}

# xprt_line MOUNTPOINT: the "xprt: rdma ..." line of that mount in mountstats.
xprt_line() {
    awk -v mp="$1" '$1 == "device" { cur = $5 } cur == mp && $1 == "xprt:" && $2 == "rdma"' /proc/self/mountstats
}
# xprt_field MOUNTPOINT N: the Nth field after "rdma" (11 read chunks,
# 12 write chunks, 13 reply chunks; see the admin guide).
xprt_field() { xprt_line "$1" | awk -v n="$2" '{ print $(n + 2) }'; }

remount() {
    umount /mnt && nfs_mount >/dev/null && echo 3 > /proc/sys/vm/drop_caches
}

mounted_1mib() {
    line=$(grep " /mnt " /proc/mounts) || return 1
    echo "$line"
    echo "$line" | grep -q 'rsize=1048576' && echo "$line" | grep -q 'wsize=1048576' || return 1
    # mountstats shows the same options on its "opts:" line.
    awk '$1 == "device" { cur = $5 } cur == "/mnt" && $1 == "opts:"' /proc/self/mountstats |
        grep 'rsize=1048576' | grep -q 'wsize=1048576'
}

sweep_write() {
    mkdir -p /tmp/sweep /mnt/sweep || return 1
    for n in $SWEEP; do
        head -c "$n" /dev/urandom > "/tmp/sweep/f$n" && cp "/tmp/sweep/f$n" "/mnt/sweep/f$n" || return 1
    done
    sync
}

sweep_compare() {
    for n in $SWEEP; do
        [ "$(stat -c %s "/mnt/sweep/f$n")" -eq "$n" ] || { echo "f$n: size $(stat -c %s "/mnt/sweep/f$n")"; return 1; }
        cmp "/tmp/sweep/f$n" "/mnt/sweep/f$n" || return 1
    done
    rm -r /tmp/sweep /mnt/sweep
}

# long_text N: N printable bytes, a '/' every 200 so that no path component
# is longer than NAME_MAX.
long_text() {
    awk -v n="$1" 'BEGIN { a = "abcdefghijklmnopqrstuvwxyz0123456789";
        for (i = 0; i < n; i++) printf "%s", (i % 200 == 100) ? "/" : substr(a, i % 36 + 1, 1) }'
}

symlinks_create() {
    for n in $SYMLINKS; do
        ln -s "$(long_text "$n")" "/mnt/link$n" || return 1
    done
}

symlinks_read() {
    for n in $SYMLINKS; do
        t=$(readlink "/mnt/link$n") || return 1
        if [ "${#t}" -ne "$n" ] || [ "$t" != "$(long_text "$n")" ]; then
            echo "link$n: got ${#t} bytes"; return 1
        fi
    done
}

# Values are printable (base64 behind a 'v', so setfattr never takes them
# for 0x/0s encodings), N bytes each.
xattrs_set() {
    touch /mnt/xattrs || return 1
    for n in $XATTRS; do
        { printf v; head -c "$n" /dev/urandom | base64 -w 0 | head -c $((n - 1)); } > "/tmp/xattr$n" &&
            setfattr -n "user.x$n" -v "$(cat "/tmp/xattr$n")" /mnt/xattrs || return 1
    done
}

xattrs_get() {
    for n in $XATTRS; do
        getfattr --only-values -n "user.x$n" /mnt/xattrs > "/tmp/xattr$n.back" &&
            cmp "/tmp/xattr$n" "/tmp/xattr$n.back" || return 1
    done
    getfattr -d /mnt/xattrs | grep -c '^user\.x' | grep -qx 3
}

# A POSIX ACL of ACL_ENTRIES named users over NFSv3 (the NFSACL protocol),
# read back through a fresh mount.
v3_opts="vers=3,proto=$proto,port=$NFS_RDMA_PORT,nolock,mountproto=tcp,mountport=$MOUNTD_PORT,rsize=1048576,wsize=1048576"
acl_roundtrip() {
    mkdir -p /mnt3 && mount -t nfs -o "$v3_opts" "$server:/export" /mnt3 || return 1
    touch /mnt3/acl || return 1
    spec=$(awk -v n="$ACL_ENTRIES" 'BEGIN { for (i = 0; i < n; i++) printf "%su:%d:%s", i ? "," : "", 20000 + i, (i % 2) ? "rw" : "r" }')
    setfacl -m "$spec" /mnt3/acl || return 1
    getfacl -n --omit-header /mnt3/acl > /tmp/acl.set || return 1
    umount /mnt3 && echo 3 > /proc/sys/vm/drop_caches &&
        mount -t nfs -o "$v3_opts" "$server:/export" /mnt3 || return 1
    getfacl -n --omit-header /mnt3/acl > /tmp/acl.back || return 1
    n=$(grep -c '^user:[0-9]' /tmp/acl.back)
    echo "$n named entries read back"
    [ "$n" -eq "$ACL_ENTRIES" ] && cmp /tmp/acl.set /tmp/acl.back &&
        grep -qx 'user:20001:rw-' /tmp/acl.back || return 1
    rm /mnt3/acl && umount /mnt3
}

# The server makes the entries (see populate_dir in server.sh); we wait for
# it through the trigger file, whose contents close-to-open revalidates.
# A directory of its own per part of a cells.sh boot.
many_entries() {
    d=dir${RR_PART:+-$RR_PART}
    echo "$d $dirsize" > /mnt/.populate || return 1
    i=0
    until grep -q "done" /mnt/.populate; do
        i=$((i + 1))
        [ $i -lt 180 ] || { echo "server did not populate the directory"; return 1; }
        sleep 1
    done
    echo 3 > /proc/sys/vm/drop_caches
    ls "/mnt/$d" > /tmp/listing || return 1
    n=$(wc -l < /tmp/listing)
    [ "$n" -eq "$dirsize" ] || { echo "listed $n of $dirsize"; return 1; }
    seq 1 "$dirsize" | sed 's/^/entry-with-a-longish-name-/' | sort | cmp - /tmp/listing
}

# A 2000-byte WRITE crosses max_inline_write=1024 but not the default 4096.
# Sent inline, rpcrdma_rs maps its page data rather than copying it (field
# 16, pullup_copy_count, grows by less than the data).
inline_threshold() {
    before=$(xprt_field /mnt 11) pulled=$(xprt_field /mnt 16)
    head -c 2000 /dev/urandom > /tmp/small && cp /tmp/small /mnt/small && sync || return 1
    after=$(xprt_field /mnt 11) pulled_after=$(xprt_field /mnt 16)
    echo "read chunks $before -> $after, bytes pulled up $pulled -> $pulled_after (max_inline_write $max_inline_write)"
    echo 3 > /proc/sys/vm/drop_caches && cmp /tmp/small /mnt/small && rm /mnt/small || return 1
    if [ "$max_inline_write" -lt 2000 ]; then
        [ "$after" -gt "$before" ]
    else
        [ "$after" -eq "$before" ] || return 1
        [ "${RR_MOD:-c}" != rs ] || [ $((pulled_after - pulled)) -lt 2000 ]
    fi
}

# Write the big file through the page cache in 1 MiB writes, then read it
# back from the server (caches dropped) and check every block. fio makes
# and checks the data: each 1 MiB block carries a header with its offset
# and an xxhash of its random payload, so a block lost, misplaced or
# changed fails the read-back (fio exits non-zero at the first), and
# nothing needs two copies in the guest's memory. Under TCG this costs a
# fraction of /dev/urandom piped through tee and two sha256sum passes,
# which were most of the scenario's time.
big_file() {
    set -- --name=big --filename=/mnt/big --rw=write --bs=1M --size="${big}M" \
        --ioengine=psync --verify=xxhash --verify_fatal=1 --verify_state_save=0
    rm -f /mnt/big
    fio "$@" --do_verify=0 --end_fsync=1 > /tmp/big.write 2>&1 &&
        echo 3 > /proc/sys/vm/drop_caches || { tail -n 3 /tmp/big.write; return 1; }
    [ "$(stat -c %s /mnt/big)" -eq $((big * 1048576)) ] || { echo "size $(stat -c %s /mnt/big)"; return 1; }
    fio "$@" --verify_only=1 > /tmp/big.verify 2>&1 ||
        { grep -m 3 -iE 'verify|err=' /tmp/big.verify; return 1; }
    echo "$big MiB written, every block read back and checked"
    rm /mnt/big
}

# umount -f under direct reads: sunrpc kills the RPCs in flight, whose
# Write chunks are still registered. Their memory must be fenced off before
# the pages are reused (rpcrdma_rs tears the connection down and waits).
# What a user sees: umount -f of a busy mount is refused and leaves the
# mount, the reads it killed end in an error instead of hanging, and the
# mount goes on working: the file reads back intact afterwards.
# The mount is busy by construction, not by timing: a reader (fu_reader)
# holds the file open and its cwd in the mount for as long as it runs, and
# it runs direct reads back to back until FU_STOP appears, which only
# happens after the forced unmounts. A read may be between two RPCs when
# umount -f comes (nothing to kill then): each round forces again, up to 5
# times, until one read ended in an error.
FU_LOG=/tmp/fu.log FU_STOP=/tmp/fu.stop
fu_reader() {
    cd /mnt/sweep && exec 3< f67108864 || { echo "no hold" >> $FU_LOG; return 1; }
    echo "holding" >> $FU_LOG
    while [ ! -e $FU_STOP ]; do
        dd if=f67108864 of=/dev/null bs=1M iflag=direct 2>> /tmp/fu.err
        echo "rc $?" >> $FU_LOG
    done
    echo "stopped" >> $FU_LOG
}
fu_errors() { grep -c '^rc [1-9]' $FU_LOG; }
fu_reads() { grep -c '^rc ' $FU_LOG; }

forced_umount_under_io() {
    f=/mnt/sweep/f67108864
    rm -f $FU_STOP && : > $FU_LOG && : > /tmp/fu.err || return 1
    # Off check's output, or check would wait for the reader to end.
    (exec > /dev/console 2>&1 < /dev/null; fu_reader) &
    pid=$!
    w=0
    until grep -q '^holding' $FU_LOG; do
        w=$((w + 1))
        if [ $w -gt 60 ] || grep -q '^no hold' $FU_LOG; then
            touch $FU_STOP; echo "the reader did not open $f: $(cat $FU_LOG)"; return 1
        fi
        sleep 1
    done
    round=1 forced=0
    while [ $round -le 3 ]; do
        e0=$(fu_errors) tries=0
        until [ "$(fu_errors)" -gt "$e0" ]; do
            tries=$((tries + 1))
            if [ $tries -gt 5 ]; then
                touch $FU_STOP
                echo "round $round: 5 x umount -f under reads, no read ended in an error ($(fu_reads) reads)"
                return 1
            fi
            # It cannot have ended: FU_STOP does not exist yet.
            kill -0 $pid 2>/dev/null || { echo "the reader ended: $(tail -n 3 $FU_LOG | tr '\n' ' ')"; return 1; }
            forced=$((forced + 1))
            if umount -f /mnt 2> /tmp/fu.umount; then
                touch $FU_STOP; echo "umount -f unmounted a mount a process holds open"; return 1
            fi
            grep -q " /mnt " /proc/mounts || { touch $FU_STOP; echo "the mount went away: $(cat /tmp/fu.umount)"; return 1; }
            # The killed read ends in an error: wait for it (20 s at most
            # before forcing again).
            w=0
            while [ "$(fu_errors)" -le "$e0" ] && [ $w -lt 20 ]; do sleep 1; w=$((w + 1)); done
        done
        round=$((round + 1))
    done
    touch $FU_STOP
    # The reader ends after its current read: no read may hang.
    await_exit $pid 180 ||
        { echo "a read still running 180 s after the forced unmounts: $(tail -n 3 $FU_LOG | tr '\n' ' ')"; return 1; }
    wait $pid 2>/dev/null
    note "forced unmounts: $forced umount -f refused (busy), $(fu_errors) of $(fu_reads) reads ended in an error: $(grep -v records /tmp/fu.err | sort -u | head -n 2 | tr '\n' ' ')"
    grep -q " /mnt " /proc/mounts || { echo "the mount went away"; return 1; }
    echo 3 > /proc/sys/vm/drop_caches
    cmp /tmp/sweep/f67108864 $f
}

chunk_counts() {
    line=$(xprt_line /mnt)
    [ -n "$line" ] || { echo "no xprt: rdma line for /mnt"; return 1; }
    echo "$line" | awk '{ printf "read chunks %s, write chunks %s, reply chunks %s\n", $13, $14, $15 }'
    echo "$line" | awk '$13 > 0 && $14 > 0 && $15 > 0 { ok = 1 } END { exit !ok }'
}

# ib_dereg_mr happens when sunrpc destroys the transport, a moment after
# the last umount: give it a while.
mrs_released() {
    i=0
    until [ "$(mr_count)" = "$mr_before" ]; do
        i=$((i + 1))
        [ $i -lt 30 ] || { echo "mr count $(mr_count), $mr_before before mount"; return 1; }
        sleep 1
    done
    echo "mr count back to $mr_before"
}

check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "$mod"
mr_before=$(mr_count)
note "$RDMA_DEV mr count before mount: $mr_before"
check mr_count_readable [ -n "$mr_before" ]
if check mount nfs_mount; then
    check transport_in_use transport_in_use
    check rsize_wsize_1MiB mounted_1mib
    check size_sweep_write sweep_write
    check symlinks_create symlinks_create
    check xattrs_set xattrs_set
    check "acl_${ACL_ENTRIES}_entries_v3" acl_roundtrip
    check remount remount
    check forced_umount_under_io forced_umount_under_io
    check size_sweep_read_compare sweep_compare
    check symlinks_readlink symlinks_read
    check xattrs_get xattrs_get
    check "readdir_${dirsize}_entries" many_entries
    check inline_threshold inline_threshold
    [ "$big" -gt 0 ] && check "big_file_${big}MiB" big_file
    note "xprt /mnt: $(xprt_line /mnt)"
    mr_mounted=$(mr_count)
    note "$RDMA_DEV mr count while mounted: $mr_mounted"
    check chunk_counts chunk_counts
    check mrs_registered [ "$mr_mounted" -gt "$mr_before" ]
    check cleanup rm -f /mnt/link900 /mnt/link1000 /mnt/link4000 /mnt/xattrs /mnt/.populate
    # rr.teardown=1: the server unloads its transport once we are gone,
    # and checks what it traced (server.sh teardown).
    [ -z "${RR_TEARDOWN:-}" ] || check teardown_request touch /mnt/.teardown
    check umount umount /mnt
    grep -qs " /mnt3 " /proc/mounts && umount /mnt3
    check mrs_released mrs_released
fi
check unload_transport unload "$modname"
[ -z "${RR_TEARDOWN:-}" ] || check server_teardown_done await_server teardown 300

# Benchmark workloads for scripts/bench.sh (not a test): fio against the
# NFS mount (rsize/wsize 1 MiB asked; whatever the transport negotiates is
# reported), each job's JSON sent to the results port between RR-FIO-BEGIN
# and RR-FIO-END lines, and /proc/self/mountstats (per-op RPC counts and
# times) between RR-STATS-BEGIN and RR-STATS-END at the end.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
opts="$opts,rsize=1048576,wsize=1048576"
runtime=${RR_RUNTIME:-20}
size=${RR_SIZE:-64}
dir=/mnt/bench

# The metadata jobs run on a second mount of the same export with the
# attribute cache off (actimeo=0). With the default cache (3 to 60 s) most
# stat() calls never leave the client, so "stat files" measured nfs.ko's
# cache hit rate, identical code for both transports, and swung 5x between
# runs. actimeo=0 is what an admin sets where several clients share files
# and must see each other's changes at once; every stat() then costs a
# GETATTR round trip (plus the directory's revalidation), which is what the
# transport is there to carry. noac would also make writes synchronous;
# these jobs write nothing, so actimeo=0 is the narrower knob. The second
# mount shares the first one's NFS client and RDMA connection.
md_mnt=/md
md_dir=$md_mnt/bench

# client_rpcs: the RPCs this client has sent (retransmissions aside).
client_rpcs() {
    awk '$1 == "rpc" { print $2 }' /proc/net/rpc/nfs
}

# funcs_start / funcs_stop NAME: ftrace's function profiler over the
# client's job, its counts to the host with the RPCs sent meanwhile.
funcs_start() {
    [ -e $TRACEFS/function_profile_enabled ] || mount -t tracefs nodev $TRACEFS
    echo 0 > $TRACEFS/function_profile_enabled
    client_rpcs > /tmp/client.rpcs
    echo 1 > $TRACEFS/function_profile_enabled
}
funcs_stop() {
    echo 0 > $TRACEFS/function_profile_enabled
    funcs_report "$1" "$(($(client_rpcs) - $(cat /tmp/client.rpcs)))"
}

# insns_mark NAME start|stop: under RR_PROFILER=insns, have the host's
# QEMU plugin (tools/qemu-insns), which follows this log, snapshot the
# guest's instruction counts; the second mark sends the RPCs sent in
# between and where the transport modules sit in memory, for the host to
# name the code. The pause lets the snapshot land before the job starts
# (or after it ended): a late one only adds a few idle instructions.
insns_mark() {
    echo "RR-INSNS-SNAP $1 $2" > "$RESULTS"
    sleep 1
    if [ "$2" = start ]; then
        client_rpcs > /tmp/client.rpcs
        return 0
    fi
    echo "RR-INSNS-RPCS $1 $(($(client_rpcs) - $(cat /tmp/client.rpcs)))" > "$RESULTS"
    for s in /sys/module/rpcrdma*/sections/.text*; do
        m=${s#/sys/module/}
        echo "RR-INSNS-SECT $1 ${m%%/*} ${s##*/} $(cat "$s")"
    done > "$RESULTS"
}

# profiling NAME: whether RR_PROFILE names this job (or is "all").
profiling() {
    case " $RR_PROFILE " in *" $1 "* | *" all "*) return 0 ;; esac
    return 1
}

# server_profile start|stop: ask the server (server.sh's fault_watch) to
# start or stop its perf recording, through the export, and wait until it
# did. The server rewrites the file when done; O_DIRECT reads see that
# through the client's caches.
server_profile() {
    echo "$1" > /mnt/.profile || return 1
    want=started; [ "$1" = stop ] && want="done"
    for _ in $(seq 1 120); do
        [ "$(dd if=/mnt/.profile iflag=direct bs=4096 2>/dev/null)" = "$want" ] && return 0
        sleep 1
    done
    echo "server did not answer profile $1"; return 1
}

# server_cpu start|stop NAME: under rr.srvcpu=on (the bench's server
# dimension), have the server (server.sh's cpu_watch) take its CPU ticks
# now, through a trigger file in the export, and wait until it did: "start"
# before the client's own first sample, "stop" after its last, so that the
# server's window holds the client's. The server answers "started NAME" or
# "stopped NAME" in the same file and sends its ticks to the host itself
# (RR-SCPU). O_DIRECT reads see the server's answer through the client's
# caches. The polls cost a READ each; the server counts them in its window
# (a few RPCs against thousands per job).
server_cpu() {
    [ "${RR_SRVCPU:-}" = on ] || return 0
    echo "$1 $2" > /mnt/.cpu || return 1
    want="started $2"; [ "$1" = stop ] && want="stopped $2"
    for _ in $(seq 1 300); do
        [ "$(dd if=/mnt/.cpu iflag=direct bs=4096 2>/dev/null)" = "$want" ] && return 0
        sleep 0.1
    done
    echo "server did not answer cpu $1 $2"; return 1
}

# fio_job NAME ARGS...: one fio run, its JSON to the host, with the CPU
# time the client spent (RR-CPU NAME user sys softirq idle other, ticks)
# and, under rr.srvcpu=on, the server's (server_cpu); under RR_PROFILE,
# with cpu-clock profiles of both guests.
fio_job() {
    name=$1; shift
    case " ${RR_JOBS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
    echo 3 > /proc/sys/vm/drop_caches
    set -- fio --name="$name" --output-format=json --output=/tmp/"$name".json "$@"
    if profiling "$name" && [ "${RR_PROFILER:-perf}" = insns ]; then
        insns_mark "$name" start
    elif profiling "$name"; then
        server_profile start || return 1
        if [ "${RR_PROFILER:-perf}" = funcs ]; then
            funcs_start
        else
            set -- perf record -q -a -e cpu-clock -F 199 -o /tmp/"$name".perf -- "$@"
        fi
    fi
    server_cpu start "$name" || return 1
    t0=$(cpu_ticks)
    "$@" > /tmp/"$name".out 2>&1 || { tail -n 5 /tmp/"$name".out /tmp/"$name".json; return 1; }
    t1=$(cpu_ticks)
    if profiling "$name" && [ "${RR_PROFILER:-perf}" = insns ]; then insns_mark "$name" stop; fi
    server_cpu stop "$name" || return 1
    { echo "RR-FIO-BEGIN $name"; cat /tmp/"$name".json; echo "RR-FIO-END $name"; } > "$RESULTS"
    echo "$t0 $t1" | awk -v n="$name" '{ print "RR-CPU", n, $6 - $1, $7 - $2, $8 - $3, $9 - $4, $10 - $5 }' > "$RESULTS"
    if profiling "$name" && [ "${RR_PROFILER:-perf}" != insns ]; then
        server_profile stop || return 1
        if [ "${RR_PROFILER:-perf}" = funcs ]; then
            funcs_stop "client $name"
        else
            perf_report "client $name" /tmp/"$name".perf
        fi
    fi
}

# shellcheck disable=SC2154 # server and export_path come from nfs-mount.sh
md_mount() {
    mkdir -p $md_mnt &&
        mount -t nfs -o "$opts,actimeo=0,retry=0" "$server:$export_path" $md_mnt || return 1
    grep " $md_mnt " /proc/mounts | grep -q "acregmin=0,acregmax=0,acdirmin=0,acdirmax=0" ||
        { grep " $md_mnt " /proc/mounts; echo "actimeo=0 not in effect"; return 1; }
}

data="--directory=$dir --filename=data --size=${size}M --ioengine=libaio --direct=1"
timed="--time_based --runtime=$runtime --ramp_time=2"
# The same RR_MDFILES files for create, stat and delete (fio names files per job,
# but not with filename_format). create_on_open=1 on stat and delete too:
# the created files are empty, and without it fio would first write 4 KiB
# into each (minutes of untimed I/O before the timed part).
# shellcheck disable=SC2016 # $filenum is fio's
md='--directory='$md_dir' --nrfiles='${RR_MDFILES:-200}' --filesize=4k --openfiles=1 --create_on_open=1 --filename_format=md.$filenum'


check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
if check mount nfs_mount; then
    check transport_in_use transport_in_use
    mnt=$(grep " /mnt " /proc/mounts)
    note "mount: $mnt"
    echo "RR-MOUNT rsize=$(echo "$mnt" | sed -n 's/.*rsize=\([0-9]*\).*/\1/p') wsize=$(echo "$mnt" | sed -n 's/.*wsize=\([0-9]*\).*/\1/p')" > "$RESULTS"
    # rpcrdma_rs's RPC-over-RDMA version on the mount's connection (the
    # bench's version dimension), once the mount's first RPCs settled it.
    rdma_vers=$(cat /sys/kernel/debug/sunrpc/rpc_xprt/*/rdma_version 2>/dev/null | sort -u | xargs)
    [ -z "$rdma_vers" ] || echo "RR-RDMAVERS $rdma_vers" > "$RESULTS"
    mkdir -p $dir
    # shellcheck disable=SC2086 # option lists
    {
        check fio_seq_write_1m fio_job seq_write_1m $data $timed --rw=write --bs=1M --iodepth=4
        check fio_seq_read_1m fio_job seq_read_1m $data $timed --rw=read --bs=1M --iodepth=4
        check fio_rand_read_4k_qd1 fio_job rand_read_4k_qd1 $data $timed --rw=randread --bs=4k --iodepth=1
        check fio_rand_read_4k_qd16 fio_job rand_read_4k_qd16 $data $timed --rw=randread --bs=4k --iodepth=16
        if check md_mount md_mount; then
            note "metadata mount: $(grep " $md_mnt " /proc/mounts)"
            echo "RR-MDMOUNT $(grep " $md_mnt " /proc/mounts | cut -d' ' -f4)" > "$RESULTS"
            mkdir -p $md_dir
            check fio_md_create fio_job md_create --ioengine=filecreate $md
            check fio_md_stat fio_job md_stat --ioengine=filestat $md $timed
            check fio_md_delete fio_job md_delete --ioengine=filedelete $md
        fi
    }
    { echo "RR-STATS-BEGIN"; cat /proc/self/mountstats; echo "RR-STATS-END"; } > "$RESULTS"
    # rxe's packet counters: retransmits, RNR NAKs and packets per op.
    note "rxe: $(rdma statistic show link | tr -s ' \n' ' ')"
    rm -rf $dir $md_dir /mnt/.cpu
    if grep -q " $md_mnt " /proc/mounts; then check umount_md umount $md_mnt; fi
    check umount umount /mnt
fi

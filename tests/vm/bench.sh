# Benchmark workloads for scripts/bench.sh (not a test): fio against the
# NFS mount (rsize/wsize 1 MiB asked; whatever the transport negotiates is
# reported), each job's JSON sent to the results port between RR-FIO-BEGIN
# and RR-FIO-END lines.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
opts="$opts,rsize=1048576,wsize=1048576"
runtime=${RR_RUNTIME:-20}
size=${RR_SIZE:-64}
dir=/mnt/bench

# fio_job NAME ARGS...: one fio run, its JSON to the host.
fio_job() {
    name=$1; shift
    echo 3 > /proc/sys/vm/drop_caches
    fio --name="$name" --directory=$dir --output-format=json --output=/tmp/"$name".json "$@" ||
        { tail -n 5 /tmp/"$name".json; return 1; }
    { echo "RR-FIO-BEGIN $name"; cat /tmp/"$name".json; echo "RR-FIO-END $name"; } > "$RESULTS"
}

data="--filename=data --size=${size}M --ioengine=libaio --direct=1"
timed="--time_based --runtime=$runtime --ramp_time=2"
# The same 200 files for create, stat and delete (fio names files per job).
# shellcheck disable=SC2016 # $filenum is fio's
md='--nrfiles=200 --filesize=4k --openfiles=1 --filename_format=md.$filenum'


check client_net net_up 192.0.2.2 2001:db8::2
check client_transport load_transport "${RR_MOD:-c}"
if check mount nfs_mount; then
    check transport_in_use transport_in_use
    mnt=$(grep " /mnt " /proc/mounts)
    note "mount: $mnt"
    echo "RR-MOUNT rsize=$(echo "$mnt" | sed -n 's/.*rsize=\([0-9]*\).*/\1/p') wsize=$(echo "$mnt" | sed -n 's/.*wsize=\([0-9]*\).*/\1/p')" > "$RESULTS"
    mkdir -p $dir
    # shellcheck disable=SC2086 # option lists
    {
        check fio_seq_write_1m fio_job seq_write_1m $data $timed --rw=write --bs=1M --iodepth=4
        check fio_seq_read_1m fio_job seq_read_1m $data $timed --rw=read --bs=1M --iodepth=4
        check fio_rand_read_4k_qd1 fio_job rand_read_4k_qd1 $data $timed --rw=randread --bs=4k --iodepth=1
        check fio_rand_read_4k_qd16 fio_job rand_read_4k_qd16 $data $timed --rw=randread --bs=4k --iodepth=16
        check fio_md_create fio_job md_create --ioengine=filecreate --create_on_open=1 $md
        check fio_md_stat fio_job md_stat --ioengine=filestat $md $timed
        check fio_md_delete fio_job md_delete --ioengine=filedelete $md
    }
    grep -A 3 "xprt:" /proc/self/mountstats
    rm -rf $dir
    check umount umount /mnt
fi

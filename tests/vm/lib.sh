# Guest-side helpers shared by the scenario scripts (sourced by /init).
# shellcheck shell=sh

RESULTS=/dev/ttyS1
# Busybox's shell runs its own applets before searching PATH: name the
# iproute2 binary in full, or the applet (which knows no nodad) runs instead.
IP=/usr/sbin/ip
FAILED=0
SERVER4=192.0.2.1
SERVER6=2001:db8::1
# Fixed service ports, so NFSv3 clients need no rpcbind query.
NFS_PORT=2049
NFS_RDMA_PORT=20049
MOUNTD_PORT=20048

# result NAME PASS|FAIL [detail]: one line the host runner parses.
result() {
    [ "$2" = PASS ] || FAILED=1
    echo "RR-RESULT $1 $2${3:+ $3}" > "$RESULTS"
    echo "RR-RESULT $1 $2${3:+ $3}"
}
note() { echo "RR-NOTE $*" > "$RESULTS"; echo "== $*"; }

# check NAME CMD...: run CMD, report its exit status as the result NAME and
# return it, so that later steps can depend on earlier ones.
check() {
    name=$1; shift
    if out=$("$@" 2>&1); then
        result "$name" PASS
    else
        result "$name" FAIL "$(echo "$out" | tail -n 3 | tr '\n' ' ')"
        return 1
    fi
}

finish() {
    echo "RR-DONE $FAILED" > "$RESULTS"
    sync
    reboot -f
}

# net_up ADDR4 ADDR6: address eth0 and put a soft-RoCE device on it.
net_up() {
    $IP link set lo up &&
        $IP link set eth0 up &&
        $IP addr add "$1/24" dev eth0 &&
        $IP -6 addr add "$2/64" dev eth0 nodad || return 1
    rdma link add rxe0 type rxe netdev eth0 || return 1
    note "rxe0 on eth0 $1 $2"
}

# load_transport c|rs|none: insmod the RPC/RDMA transport this run asks for,
# with the module parameters of rr.modparams (comma-separated name=value).
load_transport() {
    case $1 in
    c)    insmod /modules/rpcrdma.ko ;;
    # shellcheck disable=SC2086
    rs)   insmod /modules/rpcrdma_rs.ko ${RR_MODPARAMS:-} ;;
    none) return 0 ;;
    *)    echo "unknown transport module '$1'"; return 1 ;;
    esac
}

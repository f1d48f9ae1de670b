#!/usr/bin/env bash
# The main job: build the kernel and rpcrdma_rs.ko, boot the server and client
# VMs, mount NFSv4.2 over RDMA, write, read back and compare, and show what
# happened (the guest's steps, the server transport's counters beside the
# client's mountstats transport line, the timings).
#
#   SERVER=rs|c     transport module under nfsd: rpcrdma_rs.ko (default) or rpcrdma.ko
#   CLIENT=rs|c     transport module in the client VM: rpcrdma_rs.ko (default) or rpcrdma.ko
#   PROTO=rdma|rdma6|tcp   VERS=4.2|4.1|3   SIZE=MiB   FILES=count
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

SERVER=${SERVER:-rs} CLIENT=${CLIENT:-rs} PROTO=${PROTO:-rdma} VERS=${VERS:-4.2}
SIZE=${SIZE:-16} FILES=${FILES:-200}
T_PASS=0 T_FAIL=0
RUN_DIR=$REPO_DIR/out/demo-$(date +%Y%m%d-%H%M%S)

kbuild=$("$REPO_DIR/scripts/kernel-build.sh")
rs_ko=$(KDIR=$kbuild "$REPO_DIR/scripts/build-module.sh")
vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
for m in SERVER CLIENT; do
    case ${!m} in rs | c) ;; *) die "$m=${!m}: rs or c" ;; esac
done
modname() { if [ "$1" = rs ]; then echo rpcrdma_rs.ko; else echo rpcrdma.ko; fi; }
srv=$SERVER cli=$CLIENT
if [ "$PROTO" = tcp ]; then srv=none cli=none; fi
step "demo: server $(modname "$SERVER"), client $(modname "$CLIENT"), NFSv$VERS over $PROTO, $SIZE MiB and $FILES files"
run_pair demo 900 "rr.mod=$srv" \
    "rr.script=nfs-io rr.mod=$cli rr.proto=$PROTO rr.vers=$VERS rr.size=$SIZE rr.files=$FILES"
echo
# The server's counters, asked for by the client before it unmounted
# (tests/vm/nfs-io.sh server_counters), one name=value per line.
echo "--- server: $(modname "$SERVER") under nfsd (totals over all its connections, after the I/O) ---"
tr -d '\r' < "$VM_DIR/server.results.log" | sed -n 's/^RR-COUNTERS //p' |
    while read -r src kvs; do
        echo "$src:"
        printf '%s\n' $kvs | sed 's/=/ /' | awk '{ printf "  %-28s %s\n", $1, $2 }'
    done
echo "--- client: $(modname "$CLIENT") (/proc/self/mountstats: the last mount's transport) ---"
xprt=$(grep -a 'xprt:' "$VM_DIR/client.console.log" | tr -d '\r' | tail -n 1)
echo "$xprt"
# The RDMA line's fields, as the admin guide lists them (Counters).
case $xprt in
*"xprt:"*rdma*)
    # shellcheck disable=SC2086 # the line's fields
    set -- ${xprt#*xprt:}
    printf '  sends %s, receives %s, bad XIDs %s; read chunks %s, write chunks %s, reply chunks %s;\n' "$7" "$8" "$9" "${12}" "${13}" "${14}"
    printf '  RDMA request bytes %s, reply bytes %s; failed marshals %s, bad replies %s, Long Calls %s\n' "${15}" "${16}" "${20}" "${21}" "${22}" ;;
esac
grep -a 'RR-NOTE' "$VM_DIR/client.results.log" "$VM_DIR/server.results.log" | tr -d '\r' | sed 's/.*RR-NOTE /note: /'
rm -f "$RUN_DIR"/*.cpio
echo "logs: $VM_DIR"
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"
[ "$T_FAIL" -eq 0 ]

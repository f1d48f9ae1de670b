#!/usr/bin/env bash
# The main job: build the kernel and rpcrdma_rs.ko, boot the server and client
# VMs, mount NFSv4.2 over RDMA, write, read back and compare, and show what
# happened (the guest's steps, its mountstats transport line, the timings).
#
#   CLIENT=rs|c     transport module in the client VM: rpcrdma_rs.ko (default)
#   PROTO=rdma|rdma6|tcp   VERS=4.2|4.1|3   SIZE=MiB   FILES=count
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

CLIENT=${CLIENT:-rs} PROTO=${PROTO:-rdma} VERS=${VERS:-4.2}
SIZE=${SIZE:-16} FILES=${FILES:-200}
T_PASS=0 T_FAIL=0
RUN_DIR=$REPO_DIR/out/demo-$(date +%Y%m%d-%H%M%S)

kbuild=$("$REPO_DIR/scripts/kernel-build.sh")
rs_ko=$(KDIR=$kbuild "$REPO_DIR/scripts/build-module.sh")
vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
srv=c; [ "$PROTO" = tcp ] && srv=none
step "demo: client module '$CLIENT', NFSv$VERS over $PROTO, $SIZE MiB and $FILES files"
run_pair demo 900 "rr.mod=$srv" \
    "rr.script=nfs-io rr.mod=$CLIENT rr.proto=$PROTO rr.vers=$VERS rr.size=$SIZE rr.files=$FILES"
echo
echo "--- client transport (from /proc/self/mountstats) ---"
grep -a -A 3 'xprt:' "$VM_DIR/client.console.log" | tr -d '\r' | grep -v '^--$' || true
grep -a 'RR-NOTE' "$VM_DIR/client.results.log" "$VM_DIR/server.results.log" | tr -d '\r' | sed 's/.*RR-NOTE /note: /'
rm -f "$RUN_DIR"/*.cpio
echo "logs: $VM_DIR"
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"
[ "$T_FAIL" -eq 0 ]

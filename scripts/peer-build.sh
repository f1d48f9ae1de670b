#!/usr/bin/env bash
# Build tests/peer/ into out/rpcrdma-peer and print its path: the hostile
# RPC-over-RDMA server of the hostile-* scenarios (rpcrdma-peer.c) and,
# as rpcrdma-peer -c, the hostile client of svc-hostile-* (rpcrdma-client.c).
# Beside it, out/nfsd-listener (nfsd-listener.c): nfsd's listeners set
# through netlink, for srv-faults' bond failover, and out/ud-lost
# (ud-lost.c): a UD send whose source GID went, for srv-faults'
# rxe_ud_send_lost_keeps_qp.
# Needs libibverbs-dev and librdmacm-dev (scripts/provision.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dir=$REPO_DIR/tests/peer
srcs=("$dir/rpcrdma-peer.c" "$dir/rpcrdma-client.c")
out=$REPO_DIR/out/rpcrdma-peer
stale=0
for f in "${srcs[@]}" "$dir/peer.h" "$0"; do
    [ "$f" -nt "$out" ] && stale=1
done
if [ ! -x "$out" ] || [ $stale = 1 ]; then
    mkdir -p "$(dirname "$out")"
    gcc -O2 -g -Wall -Wextra -Werror -o "$out.tmp" "${srcs[@]}" -lrdmacm -libverbs
    mv "$out.tmp" "$out"
fi
tool=$REPO_DIR/out/nfsd-listener
if [ ! -x "$tool" ] || [ "$dir/nfsd-listener.c" -nt "$tool" ] || [ "$0" -nt "$tool" ]; then
    gcc -O2 -g -Wall -Wextra -Werror -o "$tool.tmp" "$dir/nfsd-listener.c"
    mv "$tool.tmp" "$tool"
fi
tool=$REPO_DIR/out/ud-lost
if [ ! -x "$tool" ] || [ "$dir/ud-lost.c" -nt "$tool" ] || [ "$0" -nt "$tool" ]; then
    gcc -O2 -g -Wall -Wextra -Werror -o "$tool.tmp" "$dir/ud-lost.c" -libverbs
    mv "$tool.tmp" "$tool"
fi
echo "$out"

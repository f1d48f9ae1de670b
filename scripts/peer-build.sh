#!/usr/bin/env bash
# Build tests/peer/rpcrdma-peer.c, the hostile RPC-over-RDMA server of the
# hostile-* scenarios, into out/; print its path. Needs libibverbs-dev and
# librdmacm-dev (scripts/provision.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

src=$REPO_DIR/tests/peer/rpcrdma-peer.c
out=$REPO_DIR/out/rpcrdma-peer
if [ ! -x "$out" ] || [ "$src" -nt "$out" ] || [ "$0" -nt "$out" ]; then
    mkdir -p "$(dirname "$out")"
    gcc -O2 -g -Wall -Wextra -Werror -o "$out.tmp" "$src" -lrdmacm -libverbs
    mv "$out.tmp" "$out"
fi
echo "$out"

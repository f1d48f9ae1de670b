#!/usr/bin/env bash
# Build rpcrdma_rs.ko against KDIR (default: the cached test kernel, built on
# first use). Extra arguments go to kbuild, e.g. CLIPPY=1. Prints the .ko path.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

LLVM=${LLVM:--19}
KDIR=${KDIR:-$("$REPO_DIR/scripts/kernel-build.sh")}
step "rpcrdma_rs.ko: building against $KDIR"
make -C "$KDIR" M="$REPO_DIR" LLVM="$LLVM" "$@" modules >&2
echo "$REPO_DIR/rpcrdma_rs.ko"

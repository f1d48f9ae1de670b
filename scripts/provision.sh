#!/usr/bin/env bash
# Install what building and testing rpcrdma_rs needs on Debian 12.
# Idempotent: every step checks first. Never touches the machine's apt sources.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PKGS=(clang-19 lld-19 llvm-19 libclang-19-dev bc flex bison libelf-dev libssl-dev
      cpio xz-utils zstd dwarves make gcc busybox-static qemu-system-x86 iproute2
      rdma-core nfs-kernel-server nfs-common rpcbind fio attr acl kmod curl ca-certificates
      python3    # python3: the host talks QMP to QEMU (scripts/vm.sh vm_qmp)
      tcpdump    # copied into the guests: matrix-rs-rs captures RoCEv2 for tools/rdma-wire
      libibverbs-dev librdmacm-dev ibverbs-providers)   # tests/peer/rpcrdma-peer.c and its rxe provider in the guest
BINDGEN_MIN=0.71.1

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    step "apt: installing ${missing[*]}"
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
    # nfs-kernel-server starts services on install; the host needs none of them.
    $SUDO systemctl disable --now nfs-server rpcbind rpcbind.socket >/dev/null 2>&1 || true
fi

command -v rustup >/dev/null || die "rustup not found: install the Rust toolchain first"
if ! rustup component list --installed | grep -q '^rust-src'; then
    step "rustup: adding rust-src"
    rustup component add rust-src
fi

ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
have_bindgen=$(bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ -z "$have_bindgen" ] || ! ver_ge "$have_bindgen" "$BINDGEN_MIN"; then
    step "cargo: installing bindgen-cli (a few minutes)"
    LIBCLANG_PATH=/usr/lib/llvm-19/lib cargo install --locked bindgen-cli
fi
ok "provisioned"

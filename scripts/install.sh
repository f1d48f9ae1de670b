#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Install rpcrdma_rs.ko in place of rpcrdma.ko, or uninstall it (make
# install, make uninstall). POSIX sh: the test VMs run it under busybox.
#
#   scripts/install.sh install|uninstall
#   KVER=$(uname -r)       the kernel to install for; the module's vermagic must match
#   DESTDIR= or INSTALL_MOD_PATH=   a staging root (both prefix /lib/modules and /etc)
#   KO=rpcrdma_rs.ko       the built module (install only)
#   DEPMOD=/sbin/depmod MODINFO=/sbin/modinfo   kmod's tools (by path: a busybox
#                          shell runs its own applets of those names first)
#
# install: the module goes to /lib/modules/$KVER/updates/, depmod runs, and
# /etc/modprobe.d/rpcrdma_rs.conf maps every name the kernel asks modprobe
# for onto rpcrdma_rs. uninstall removes those two files and runs depmod
# again: the same names load rpcrdma.ko.
set -eu

usage() { echo "usage: $0 install|uninstall" >&2; exit 2; }
die() { echo "error: $*" >&2; exit 1; }
[ $# -eq 1 ] || usage

KVER=${KVER:-$(uname -r)}
DESTDIR=${DESTDIR:-}
INSTALL_MOD_PATH=${INSTALL_MOD_PATH:-}
if [ -n "$DESTDIR" ] && [ -n "$INSTALL_MOD_PATH" ] && [ "$DESTDIR" != "$INSTALL_MOD_PATH" ]; then
    die "DESTDIR=$DESTDIR and INSTALL_MOD_PATH=$INSTALL_MOD_PATH differ: set one"
fi
ROOT=${DESTDIR:-$INSTALL_MOD_PATH}
DEPMOD=${DEPMOD:-/sbin/depmod}
MODINFO=${MODINFO:-/sbin/modinfo}
KO=${KO:-$(dirname "$0")/../rpcrdma_rs.ko}

moddir=$ROOT/lib/modules/$KVER
target=$moddir/updates/rpcrdma_rs.ko
conf=$ROOT/etc/modprobe.d/rpcrdma_rs.conf

run_depmod() {
    # With a staging root, depmod works on its tree; without one, on the
    # running system's.
    if [ -n "$ROOT" ]; then "$DEPMOD" -b "$ROOT" -a "$KVER"; else "$DEPMOD" -a "$KVER"; fi
}

# The names come from the 7.3 kernel: net/sunrpc/xprt.c asks for
# "rpc<netid>" (mount -o proto=rdma: "rpcrdma", rpcrdma.ko's own name;
# proto=rdma6: "rpcrdma6"), net/sunrpc/svc_xprt.c for "svc<class>"
# (nfsd's "rdma" listener: "svcrdma"); "xprtrdma" is the C module's old
# name, still an alias of both modules and in admins' scripts.
write_conf() {
    cat <<'EOF'
# Written by rpcrdma_rs's `make install` (scripts/install.sh); `make
# uninstall` removes it. rpcrdma_rs.ko replaces rpcrdma.ko: each name the
# kernel asks modprobe for loads rpcrdma_rs.
#   rpcrdma   mount -o proto=rdma (sunrpc's request_module("rpc" netid))
#   rpcrdma6  mount -o proto=rdma6
#   svcrdma   nfsd's rdma listener: rpc.nfsd --rdma, or
#             echo rdma 20049 > /proc/fs/nfsd/portlist
#   xprtrdma  rpcrdma.ko's old name
# Both modules carry the aliases rpcrdma6, svcrdma and xprtrdma, so
# without these lines modprobe would load both (the second fails), and
# "rpcrdma" names the C module itself. An alias here is looked up before
# module names and modules.alias, so it wins over both. (`blacklist
# rpcrdma` covers the aliases but not the name; `install rpcrdma ...`
# would, with a shell per load.)
# To load the C module by hand while this file exists: insmod its path.
alias rpcrdma rpcrdma_rs
alias rpcrdma6 rpcrdma_rs
alias svcrdma rpcrdma_rs
alias xprtrdma rpcrdma_rs
EOF
}

case $1 in
install)
    [ -f "$KO" ] || die "$KO: no such module; build it first (make module KDIR=/lib/modules/$KVER/build)"
    vermagic=$("$MODINFO" -F vermagic "$KO") || die "$MODINFO $KO failed"
    [ "${vermagic%% *}" = "$KVER" ] ||
        die "$KO is built for ${vermagic%% *}, not $KVER (set KVER, or build against that kernel)"
    if [ -z "$ROOT" ] && [ ! -d "$moddir" ]; then
        die "$moddir does not exist: kernel $KVER is not installed here"
    fi
    mkdir -p "$moddir/updates" "$(dirname "$conf")"
    cp "$KO" "$target.tmp" && chmod 0644 "$target.tmp" && mv "$target.tmp" "$target"
    write_conf > "$conf.tmp" && chmod 0644 "$conf.tmp" && mv "$conf.tmp" "$conf"
    run_depmod
    echo "installed $target and $conf for $KVER"
    ;;
uninstall)
    rm -f "$target" "$conf"
    # updates/ goes too if we left it empty.
    rmdir "$moddir/updates" 2>/dev/null || true
    if [ -d "$moddir" ]; then run_depmod; fi
    echo "removed $target and $conf; rpcrdma.ko serves $KVER again"
    ;;
*) usage ;;
esac

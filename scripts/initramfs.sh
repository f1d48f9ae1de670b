#!/usr/bin/env bash
# Build the base initramfs shared by both VMs (busybox, iproute2, nfs-utils,
# fio, tcpdump and their libraries) into the cache; print its path. Keyed by this
# script, the guest init and the versions of the packages it copies from.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

BINS=(/usr/sbin/ip /usr/bin/rdma /usr/sbin/mount.nfs /usr/sbin/exportfs
      /usr/sbin/rpc.mountd /usr/sbin/rpcbind /usr/sbin/rpc.statd /usr/bin/fio
      /usr/bin/getfattr /usr/bin/setfattr /usr/bin/getfacl /usr/bin/setfacl
      /usr/bin/kmod /usr/bin/tcpdump)
PKGS=(busybox-static iproute2 nfs-common nfs-kernel-server rpcbind fio attr acl kmod libc6 tcpdump)
INIT=$REPO_DIR/tests/vm/init

key=$( { cat "$0" "$INIT"; dpkg-query -W "${PKGS[@]}"; } | sha256sum | cut -c1-12)
out=$CACHE_DIR/initramfs/base-$key.cpio
if [ -f "$out" ]; then echo "$out"; exit 0; fi

step "initramfs: assembling guest userland"
root=$(mktemp -d); trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,proc,sys,dev,tmp,run,mnt,export,var/lib/nfs/rpc_pipefs,var/lib/nfs/v4recovery,var/lib/nfs/sm,var/lib/nfs/sm.bak,lib64,root}
cp /usr/bin/busybox "$root/bin/busybox"
for app in $("$root/bin/busybox" --list); do
    [ -e "$root/bin/$app" ] || ln -s busybox "$root/bin/$app"
done
copy_with_libs "$root" "${BINS[@]}"
ln -s ../run "$root/var/run"   # rpcbind's socket, where the kernel registers
# kmod where the kernel runs it for request_module (CONFIG_MODPROBE_PATH,
# /proc/sys/kernel/modprobe), with the depmod and modinfo that
# scripts/install.sh runs; busybox's applets of those names know no
# modprobe.d aliases. The modules themselves come with each run's overlay
# (scripts/vm.sh vm_modules_tree): they belong to the kernel, not here.
for t in modprobe depmod modinfo; do ln -s /usr/bin/kmod "$root/sbin/$t"; done
ln -sf /usr/sbin/mount.nfs "$root/sbin/mount.nfs"
ln -sf /usr/sbin/mount.nfs "$root/sbin/mount.nfs4"
cp /etc/protocols /etc/netconfig /etc/services "$root/etc/"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nstatd:x:100:65534::/var/lib/nfs:/bin/false\n_rpc:x:101:65534::/run/rpcbind:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
printf 'hosts: files\npasswd: files\ngroup: files\n' > "$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n192.0.2.1 server\n192.0.2.2 client\n2001:db8::1 server6\n2001:db8::2 client6\n' > "$root/etc/hosts"
touch "$root/var/lib/nfs/etab" "$root/var/lib/nfs/rmtab" "$root/etc/exports"
install -m 0755 "$INIT" "$root/init"
mkdir -p "$(dirname "$out")"
rm -f "$(dirname "$out")"/base-*.cpio   # superseded builds
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) > "$out.tmp"
mv "$out.tmp" "$out"
ok "initramfs $(du -h "$out" | cut -f1)"
echo "$out"

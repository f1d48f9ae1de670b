# SPDX-License-Identifier: GPL-2.0
#
# User-facing targets. Kbuild (next to this file) is what the kernel's build
# reads when it builds the module; this Makefile only drives the scripts.
#
#   make demo         build everything, boot the VM pair, mount NFS over RDMA, do I/O
#   make test         every test: host, fuzz, build checks, KUnit and VM scenarios
#   make bench        fio over NFS/RDMA: rpcrdma.ko vs rpcrdma_rs as client and server, REPS=3; tables, PNGs
#   make alloc-faults every allocation site of rpcrdma_rs failed in turn, client and server (kasan kernel)
#   make test KERNEL=kasan   the whole suite on the test kernel with generic KASAN
#   make soak         an hour of I/O under link outages, nfsd restarts, device removals and
#                     umount -f per client/server pair (PAIRS, SOAK_MINUTES); one table
#   make module       rpcrdma_rs.ko against KDIR (default: the cached test kernel)
#   make install      rpcrdma_rs.ko into /lib/modules/$KVER/updates, depmod, and
#                     /etc/modprobe.d/rpcrdma_rs.conf: it loads in place of rpcrdma.ko
#   make uninstall    undo that: rpcrdma.ko serves again
#                     (KVER=$(uname -r), DESTDIR= or INSTALL_MOD_PATH= to stage)
#   make KDIR=/path   the same against your own built 7.3 tree

KDIR ?=
LLVM ?= -19
export KDIR LLVM

.PHONY: all module install uninstall demo test bench soak alloc-faults provision kernel check clean
all: module

provision:
	scripts/provision.sh

kernel: provision
	scripts/kernel-build.sh

module: provision
	scripts/build-module.sh

# Installs the module already built (make module): as kbuild's
# modules_install, it builds nothing, so it can run as root on a machine
# where the build ran as someone else.
install uninstall:
	scripts/install.sh $@

demo: provision
	scripts/demo.sh

test: provision
	scripts/test.sh

bench: provision
	scripts/bench.sh

alloc-faults: provision
	scripts/alloc-faults.sh

soak: provision
	scripts/soak.sh

clean:
	[ -z "$(KDIR)" ] || $(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -rf target out sys/bindings_generated.rs

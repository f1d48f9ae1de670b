#!/usr/bin/env bash
# Allocation-failure sweep (make alloc-faults): every allocation site of
# rpcrdma_rs.ko failed in turn, on the kasan kernel (generic KASAN,
# failslab and fail_page_alloc with a stack-trace filter), as the client
# (against rpcrdma.ko's server) and as the server (under nfsd, against
# rpcrdma.ko's client).
#
# A site is a function of the module that calls an allocator (kmalloc,
# the Rust allocator's krealloc, alloc_pages) or a C function that
# allocates for it (ib_alloc_pd, ib_alloc_cq, ib_alloc_mr, rdma_create_qp,
# rdma_create_id, rdma_rw_ctx_init, rdma_resolve_*, rdma_connect,
# rdma_accept, rdma_listen, xprt_alloc, ...), from the built module's
# relocations. Arming one fails the next slab and the next page allocation
# made with it on the stack; the guest then mounts over RDMA, writes 1 MiB,
# reads it back over the wire and compares, unmounts
# (tests/vm/alloc-faults.sh). Prints one line per site reached: what
# failed where, what the mount saw, and whether a clean mount worked
# after it; then, per side, sites reached and failed. Exit 1 on any failed
# check (data lost or changed, a hang, a kernel report, a leak).
#
#   SIDES="client server"   which sides to sweep
#   AF_TIMEOUT=3600         seconds per side's boot
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$REPO_DIR/scripts/vm.sh"

SIDES=${SIDES:-client server}
AF_TIMEOUT=${AF_TIMEOUT:-3600}
T_PASS=0 T_FAIL=0
RUN_DIR=${RUN_DIR:-$REPO_DIR/out/alloc-faults-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RUN_DIR"
cd "$REPO_DIR"

step "build: kasan kernel and rpcrdma_rs.ko"
kbuild=$(KERNEL_VARIANT=kasan scripts/kernel-build.sh) || die "kasan kernel build failed"
rs_ko=$(KDIR=$kbuild scripts/build-module.sh) || die "module build failed"

# The module's functions that call an allocator or an allocating C
# function, but not the drop glue (krealloc to size 0 frees) nor the
# KUnit cases (not run here).
ALLOCATORS='__kmalloc_noprof|__kmalloc_cache_noprof|kmalloc_trace_noprof|krealloc_noprof|rust_helper_krealloc_node_align|rust_helper_kvrealloc_node_align|rust_helper_vrealloc_node_align|alloc_pages_node_noprof|rust_helper_alloc_pages|kstrdup|__ib_alloc_pd|__ib_alloc_cq_any|__ib_alloc_cq|ib_alloc_mr|rdma_create_qp|__rdma_create_kernel_id|rdma_rw_ctx_init|rdma_resolve_addr|rdma_resolve_route|rdma_connect|rdma_connect_locked|rdma_accept|rdma_listen|rdma_bind_addr|xprt_alloc|xprt_alloc_slot|svc_xprt_init|debugfs_create_dir|register_sysctl_sz'
objdump -dr --no-show-raw-insn "$rs_ko" | awk -v re="^($ALLOCATORS)\$" '
    /^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn); next }
    /R_X86_64_(PLT32|PC32)/ { s = $NF; sub(/-0x[0-9a-f]+$/, "", s); sub(/\+.*$/, "", s); if (s ~ re) print fn }' |
    sort -u | grep -v -e drop_in_place -e selftest -e kunit |
    awk '{ print NR, $1 }' > "$RUN_DIR/alloc-sites.txt"
nsites=$(wc -l < "$RUN_DIR/alloc-sites.txt")
[ "$nsites" -gt 0 ] || die "no allocation site found in $rs_ko"
step "$nsites allocating functions in rpcrdma_rs.ko ($RUN_DIR/alloc-sites.txt)"

vm_for_kasan
VM_SCENARIO_FILES=$RUN_DIR/alloc-sites.txt vm_prepare "$kbuild" "$rs_ko" "$RUN_DIR"
for side in $SIDES; do
    case $side in
    client) smod=c ;;
    server) smod=rs ;;
    *) die "SIDES=$SIDES: client and/or server" ;;
    esac
    scen=alloc-$side
    step "vm: $scen (rpcrdma_rs's allocations failed on the $side)"
    start=$SECONDS
    run_pair "$scen" "$AF_TIMEOUT" "rr.mod=$smod" "rr.script=alloc-faults rr.side=$side"
    log=$VM_RUNDIR/$scen/client.results.log
    # INDEX HIT VERDICT... | WHERE, with the function's name demangled.
    tr -d '\r' < "$log" | awk '$1 == "RR-AF" && $3 != "-"' | while read -r _ idx rest; do
        sym=$(awk -v i="$idx" '$1 == i { print $2 }' "$RUN_DIR/alloc-sites.txt" | c++filt | sed 's/\[[0-9a-f]*\]//g')
        printf '  %-4s %s\n       %s\n' "$idx" "$sym" "$(echo "$rest" | c++filt | sed 's/\[[0-9a-f]*\]//g')"
    done | tee "$RUN_DIR/$scen.sites.txt"
    reached=$(tr -d '\r' < "$log" | awk '$1 == "RR-AF" && $3 != "-"' | wc -l)
    echo "  $scen: $nsites sites, $reached reached, in $((SECONDS - start)) s"
done
printf '%d passed, %d failed\n' "$T_PASS" "$T_FAIL"
[ "$T_FAIL" -eq 0 ] && [ "$T_PASS" -gt 0 ]

# Load rpcrdma_rs.ko (its KUnit suites run at insmod and print KTAP on the
# console, which the host parses), then unload it. The rpcrdma_rs_rdma
# suite needs a soft-RoCE device: rxe0 on eth0, whose address it listens
# and connects on (rxe loops traffic to a local address back, so the
# unconnected link is enough).
# shellcheck shell=sh

KUNIT_ADDR=192.0.2.9
check net_up net_up "$KUNIT_ADDR" 2001:db8::9
check insmod insmod /modules/rpcrdma_rs.ko kunit_addr="$KUNIT_ADDR"
check loaded_version sh -c 'dmesg | grep -q "rpcrdma_rs .* loaded"'
check rdma_suite_ran sh -c '! dmesg | grep -q "rxe loopback checks skipped"'
check rmmod rmmod rpcrdma_rs
check unloaded sh -c 'dmesg | grep -q "rpcrdma_rs .* unloaded"'

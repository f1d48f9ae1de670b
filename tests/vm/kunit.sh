# Load rpcrdma_rs.ko (its KUnit suites run at insmod and print KTAP on the
# console, which the host parses), then unload it.
# shellcheck shell=sh

check insmod insmod /modules/rpcrdma_rs.ko
check loaded_version sh -c 'dmesg | grep -q "rpcrdma_rs .* loaded"'
check rmmod rmmod rpcrdma_rs
check unloaded sh -c 'dmesg | grep -q "rpcrdma_rs .* unloaded"'

# Runner self-test: crash the guest. The runner must report a failure.
# shellcheck shell=sh
echo c > /proc/sysrq-trigger

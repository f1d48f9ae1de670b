# A kernel log without the reports of injected failures (make
# alloc-faults): each "FAULT_INJECTION: forcing a failure" notice and the
# stack dump_stack printed after it, up to its </TASK>. Read by the host's
# log scan (scripts/vm.sh vm_collect) and the guests' (lib.sh fi_strip).
/FAULT_INJECTION: forcing a failure/ { skip = 1 }
!skip { print }
skip && /<\/TASK>/ { skip = 0 }

# Allocation-failure sweep (scripts/alloc-faults.sh, on the kasan kernel):
# for each of the module's allocating functions (/scenario/alloc-sites.txt),
# fail the next slab and the next page allocation made with it on the
# stack, while a mount over RDMA writes a file, reads it back over the
# wire and compares, and unmounts. rr.side=client fails rpcrdma_rs's
# allocations here, against rpcrdma.ko's server; rr.side=server has the
# server (rpcrdma_rs under nfsd) fail its own, armed through a control
# mount over TCP (server.sh allocfault_req), with rpcrdma.ko here.
#
# A failure may make the mount fail or be retried underneath it; never
# lose or change data, hang, or leave a kernel report (oops, WARN, KASAN,
# lockdep). Each injected site must then leave a clean mount working.
# One line per site to the host: "RR-AF INDEX HIT VERDICT WHERE".
# At the end: no RDMA resource left, and the module unloads (here) or the
# server's teardown (rdma counts, rmmod) passes.
# shellcheck shell=sh

. /scenario/nfs-mount.sh
side=${RR_SIDE:-client}
CTL=/ctl

# af_cycle: one mount, 1 MiB written, read back after dropping the caches
# and compared, unmount; prints "ok" or what went wrong. A step that
# blocks past its bound is killed (a hard mount's RPCs are killable).
af_cycle() {
    timeout -s KILL 120 mount -t nfs -o "$opts,retry=0" "$server:$export_path" /mnt 2> /tmp/af.err
    rc=$?
    if [ $rc -ne 0 ]; then
        grep -q " /mnt " /proc/mounts && { umount -f /mnt; umount -l /mnt; }
        # timeout's KILL: 137.
        if [ $rc -eq 137 ]; then echo mount-hang; else echo mount-failed; fi
        return 0
    fi
    v=ok
    if ! timeout -s KILL 120 cp /tmp/af.data /mnt/af.data || ! timeout -s KILL 120 sync; then
        v=write-failed
    elif ! echo 3 > /proc/sys/vm/drop_caches || ! timeout -s KILL 120 cmp -s /tmp/af.data /mnt/af.data; then
        if timeout -s KILL 120 cat /mnt/af.data > /tmp/af.back 2>/dev/null; then v=data-differs; else v=read-failed; fi
    fi
    timeout -s KILL 60 rm -f /mnt/af.data
    if ! timeout -s KILL 120 umount /mnt; then
        umount -f /mnt; umount -l /mnt
        [ "$v" != ok ] || v=umount-failed
    fi
    echo $v
}

# Arming, here or on the server.
af_arm() {
    case $side in
    client) fi_arm "$1" ;;
    server) server_ask $CTL/.allocfault 60 arm "$1" && [ "$answer" = "done 0" ] ;;
    esac
}
# af_disarm: "HIT|WHERE|BAD" (HIT: slab, page, both or "-").
af_disarm() {
    case $side in
    client) fi_report ;;
    server)
        server_ask $CTL/.allocfault 60 disarm || { echo "-||server did not answer"; return; }
        echo "${answer#done }" ;;
    esac
}

unarmed_ok() { [ "$(af_cycle)" = ok ]; }
server_fi_setup() { server_ask $CTL/.allocfault 60 setup && [ "$answer" = "done 0" ]; }
cm_ids() { rdma resource show cm_id | grep -c .; }
# settled_ids: the CM ids held here, once no more than before the sweep or
# after 120 s (a connection's id lingers until its DREQ is answered, 90 s
# at most: rdma/cm.rs LINGER_MAX_SECS).
settled_ids() {
    i=0
    while [ "$(cm_ids)" -gt "$base_ids" ] && [ $i -lt 120 ]; do
        i=$((i + 1))
        sleep 1
    done
    cm_ids
}
sweep() {
    n=0 reached=0 bad=0
    # What the unarmed cycle's connection leaves once settled.
    base_ids=0
    base_ids=$(settled_ids)
    # The other side's functions cannot be reached here: transport/client
    # (mangled "9transport6client") on the server, transport/server on the
    # client.
    case $side in
    client) other=9transport6server ;;
    server) other=9transport6client ;;
    esac
    # Not stdin: a command in the loop could read it.
    while read -r idx sym <&3; do
        case $sym in *$other*) continue ;; esac
        n=$((n + 1))
        if ! out=$(af_arm "$idx" 2>&1); then
            echo "RR-AF $idx - not-loaded" > "$RESULTS"
            continue
        fi
        v=$(af_cycle)
        IFS='|' read -r hit where log <<EOF
$(af_disarm)
EOF
        hit=$(echo $hit | tr ' ' ',')
        if [ -z "$hit" ] || [ "$hit" = - ]; then
            # Not reached: the cycle had to pass as it does unarmed.
            if [ "$v" != ok ] || [ -n "$log" ]; then
                result "alloc_fault_$idx" FAIL "unarmed cycle: $v $log"; bad=$((bad + 1))
            fi
            echo "RR-AF $idx - $v" > "$RESULTS"
            continue
        fi
        reached=$((reached + 1))
        case $v in ok | mount-failed) ok=1 ;; *) ok=0 ;; esac
        [ -z "$log" ] || ok=0
        after=ok
        if [ $ok = 1 ]; then
            after=$(af_cycle)
            [ "$after" = ok ] || ok=0
        fi
        # CM ids still held once the mounts are gone and their DREQs
        # answered: an id this site left behind.
        ids=$(settled_ids)
        [ "$ids" -le "$base_ids" ] || ok=0
        echo "RR-AF $idx $hit $v${log:+ log:$log} then:$after ids:$ids | $where" > "$RESULTS"
        if [ $ok = 1 ]; then
            result "alloc_fault_$idx" PASS
        else
            result "alloc_fault_$idx" FAIL "$hit in $where: $v, then $after, CM ids $ids (before $base_ids)${log:+; $log}"
            bad=$((bad + 1))
        fi
    done 3< $AF_SITES
    note "allocation sweep ($side): $n sites, $reached reached, $bad failed"
    [ $n -gt 0 ] && [ $reached -gt 0 ]
}

check client_net net_up 192.0.2.2 2001:db8::2
dd if=/dev/urandom of=/tmp/af.data bs=1M count=1 2>/dev/null
case $side in
client)
    check client_transport load_transport rs &&
        check fi_setup fi_setup &&
        base=$(rdma_counts) &&
        check unarmed_cycle unarmed_ok &&
        check sweep sweep &&
        check rdma_resources_back rdma_back "$base" 120
    check unload_transport unload rpcrdma_rs &&
        check rdma_resources_back_after_unload rdma_back "$base" 120
    ;;
server)
    mkdir -p $CTL
    check client_transport load_transport c &&
        check control_mount mount -t nfs -o vers=4.2,proto=tcp,port=$NFS_PORT,retry=0 "$SERVER4:/" $CTL &&
        check server_fi_setup server_fi_setup &&
        check unarmed_cycle unarmed_ok &&
        check sweep sweep
    check teardown_request sh -c 'timeout -s KILL 120 touch $0/.teardown && timeout -s KILL 120 umount $0' $CTL
    ;;
esac

# Delegations and their recall, for the scenario scripts (sourced after
# nfs-mount.sh): the client holds a file open with a delegation and asks
# the server (recall_req in server.sh, through /mnt/.recall) to write it,
# which makes nfsd recall the delegation over the backchannel.
# shellcheck shell=sh

# ask REQUEST: hand REQUEST to the server through /mnt/.recall and wait for
# its "done" line, which is left in $answer.
ask() {
    server_ask /mnt/.recall 180 "$@" || return 1
    echo "== server: $* -> $answer"
}

# field NAME: the value of NAME=... in the server's answer.
field() { echo "$answer" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# DELEGRETURNs this client sent (its mountstats per-op line).
delegreturns() { awk '$1 == "DELEGRETURN:" { print $2; exit }' /proc/self/mountstats; }

# await_deleg NAME N: until the server lists N delegations on NAME. None
# is granted during the grace periods (nfsd's and lockd's, 10 s each
# from nfsd's start, server.sh nfsd_tune), so open again for a while.
await_deleg() {
    i=0
    while :; do
        ask count "$1" || return 1
        [ "$(field delegs)" -ge "$2" ] && return 0
        i=$((i + 1))
        [ $i -lt 10 ] || { echo "$(field delegs) of $2 delegations on $1"; return 1; }
        sleep 5
        reopen "$1"
    done
}

# reopen NAME: read every file of NAME (a file, or a directory), so the
# client asks for their delegations again.
reopen() {
    if [ -d "/mnt/$1" ]; then
        cat /mnt/"$1"/* > /dev/null
    else
        # one() holds the file on fd 3, and while an open of it lasts
        # the client reuses that open and sends no OPEN: a delegation
        # refused once (the callback channel not yet probed after a
        # reconnect, say) would never be asked for again. Open it anew.
        exec 3<&- && exec 3< "/mnt/$1"
    fi
}

# recall NAME COUNT MS: the server writes to NAME (COUNT files at once);
# that must take less than MS ms, delegations must have been held and must
# all come back, counted on both sides, and the callback channel stay UP.
recall() {
    client_before=$(delegreturns)
    ask write "$1" "$2" || return 1
    ms=$(field ms) left=$(field left) returned=$(field delegreturn)
    client_returned=$(($(delegreturns) - client_before))
    note "recall $1 x$2: server write took $ms ms; $(field delegs) delegations," \
        "$left left, DELEGRETURN server $returned client $client_returned, callback $(field cb)"
    [ "$(field delegs)" -ge 1 ] || { echo "no delegation held when the server wrote"; return 1; }
    [ "$ms" -lt "$3" ] || { echo "conflicting write waited $ms ms"; return 1; }
    [ "$left" -eq 0 ] || { echo "$left delegations not returned"; return 1; }
    [ "$returned" -ge 1 ] && [ "$client_returned" -ge 1 ] ||
        { echo "DELEGRETURN not counted"; return 1; }
    cb_up "$1"
}

# cb_up NAME: the server's callback state for us must be UP, or become UP
# again within a minute: nfsd probes the channel afresh (state UNKNOWN)
# when a callback took longer than its timeout, which a flood of them
# under TCG can make happen with either client.
cb_up() {
    i=0
    until [ "$(field cb)" = UP ]; do
        i=$((i + 1))
        [ $i -le 12 ] || { echo "callback state '$(field cb)'"; return 1; }
        sleep 5
        ask count "$1" || return 1
    done
    [ $i -eq 0 ] || note "callback state UP again after $((i * 5)) s"
}

# One file held open while the server writes it: by this shell (fd 3)
# until the recall is over, not by a process that lives a fixed time.
one() {
    echo hello > /mnt/$1 && exec 3< /mnt/$1 || return 1
    await_deleg "$1" 1 && recall "$1" 1 1000
    rc=$?
    exec 3<&-
    return $rc
}

# $many files, opened and closed (the client keeps their delegations),
# then all written on the server at once. nfsd may send their CB_RECALLs
# one at a time; each one lost costs a second or more (its timeout):
# 60 s for all, under TCG.

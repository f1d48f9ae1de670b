# Several client scenarios in one boot against one server boot: the parts
# of rr.parts, in order, each the scenario script of its name with its
# results named PART/CHECK. A boot costs little; what a scenario moves
# costs the time, so the iWARP (siw) cells share boots this way.
#   matrix               matrix.sh: NFSv4.2, v4.1, v3 over IPv4 and IPv6,
#                        data and one recall each; it has the server
#                        unload its transport, so it goes last
#   chunks               chunks.sh with default inline thresholds and
#                        the big file of rr.bigsize
#   chunks-small-inline  chunks.sh with 1 KiB inline thresholds
#   recall               recall.sh with the faults of rr.faults
# Each part loads the client's transport and unloads it when done.
# shellcheck shell=sh

check client_net net_up 192.0.2.2 2001:db8::2
for part in ${RR_PARTS:-}; do
    # A subshell each: the scripts' variables and functions stay theirs.
    (
        export RR_PART="$part"
        case $part in
        chunks) script=chunks RR_MODPARAMS= ;;
        chunks-small-inline)
            script=chunks RR_MODPARAMS=max_inline_read=1024,max_inline_write=1024 RR_BIGSIZE=0 ;;
        matrix | recall) script=$part RR_MODPARAMS= ;;
        *) result part FAIL "no part '$part'"; exit 1 ;;
        esac
        export RR_MODPARAMS RR_BIGSIZE
        note "part $part"
        . "/scenario/$script.sh"
        exit "$FAILED"
    ) || FAILED=1
done

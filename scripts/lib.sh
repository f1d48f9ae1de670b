# Shared helpers for the scripts; sourced, not run.
# shellcheck shell=bash
step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
ok()   { printf '  ok: %s\n' "$*" >&2; }
die()  { printf 'error: %s\n' "$*" >&2; exit 1; }

# Everything built outside the checkout lives here, keyed by what produced it.
CACHE_DIR=${RPCRDMA_RS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rpcrdma_rs}
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# copy_with_libs ROOT BIN...: copy host binaries into ROOT at the same
# paths, with the shared libraries ldd names for them. BIN=DEST puts BIN at
# DEST in ROOT instead (a binary built in the checkout).
copy_with_libs() {
    local root=$1 b dst lib; shift
    for b in "$@"; do
        dst=${b#*=} b=${b%%=*}
        mkdir -p "$root$(dirname "$dst")"; cp "$b" "$root$dst"
        for lib in $(ldd "$b" | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}'); do
            [ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
        done
    done
}

# stats V...: "median min max count" of the numbers among the arguments
# ("- - - 0" if none).
stats() {
    printf '%s\n' "$@" | { grep -E '^[0-9.]+$' || true; } | sort -g | awk '
        { v[NR] = $1 }
        END {
            if (NR == 0) { print "- - - 0"; exit }
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            print m, v[1], v[NR], NR
        }'
}

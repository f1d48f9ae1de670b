#!/usr/bin/env bash
# Configure and build the test kernel into the cache; print the build directory.
# Key: kernel version + config fragments + kernel patches + toolchain, so a
# changed input gets a fresh tree and an unchanged one is reused without
# running make at all.
#
#   KERNEL_VARIANT=test   the tests' kernel: lockdep, KFENCE, list debugging
#   KERNEL_VARIANT=bench  the same without the lock and memory debugging (as a
#                         distribution ships it), plus the function profiler;
#                         scripts/bench.sh measures on this one
#   KERNEL_VARIANT=kasan  the test kernel with generic KASAN and fault injection
#                         (make test KERNEL=kasan, scripts/alloc-faults.sh)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

VARIANT=${KERNEL_VARIANT:-test}
FRAGS=("$REPO_DIR/scripts/kconfig/test-kernel.config")
case $VARIANT in
test) ;;
bench) FRAGS+=("$REPO_DIR/scripts/kconfig/bench-kernel.config") ;;
kasan) FRAGS+=("$REPO_DIR/scripts/kconfig/kasan-kernel.config") ;;
*) die "KERNEL_VARIANT=$VARIANT: test, bench or kasan" ;;
esac
LLVM=${LLVM:--19}
ksrc=$("$REPO_DIR/scripts/kernel-source.sh")
kver=$(make -s -C "$ksrc" kernelversion)
# Fixes to the kernel's own code that the tests need (each patch says
# why), applied to a copy of the tree keyed by them: hard links, with the
# files they change copied first, so the fetched tree stays as shipped.
PATCHES=("$REPO_DIR"/scripts/kernel-patches/*.patch)
if [ -e "${PATCHES[0]}" ]; then
    psrc=$CACHE_DIR/src/$(basename "$ksrc")-p$(cat "${PATCHES[@]}" | sha256sum | cut -c1-12)
    if [ ! -f "$psrc/.complete" ]; then
        step "kernel source: applying ${#PATCHES[@]} patch(es) in $psrc"
        rm -rf "$psrc" "$psrc.tmp"
        cp -al "$ksrc" "$psrc.tmp"
        rm -f "$psrc.tmp/.complete"
        for p in "${PATCHES[@]}"; do
            sed -n 's#^+++ b/##p' "$p" | while read -r f; do
                cp --remove-destination "$ksrc/$f" "$psrc.tmp/$f"
            done
            (cd "$psrc.tmp" && git apply -p1 "$p") || die "kernel patch does not apply: $p"
        done
        mv "$psrc.tmp" "$psrc"
        touch "$psrc/.complete"
    fi
    ksrc=$psrc
fi
key=$( { echo "$kver"; cat "${FRAGS[@]}"; [ ! -e "${PATCHES[0]}" ] || cat "${PATCHES[@]}";
         rustc --version; clang$LLVM --version | head -n1; bindgen --version; } | sha256sum | cut -c1-12)
suffix=; [ "$VARIANT" = test ] || suffix=-$VARIANT
out=${KBUILD_OUT:-$CACHE_DIR/build/linux-$kver$suffix-$key}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

mkdir -p "$out"
kmake() { make -C "$ksrc" O="$out" LLVM="$LLVM" "$@"; }
step "kernel $kver: configuring in $out"
kmake -s allnoconfig >&2
KCONFIG_CONFIG="$out/.config" "$ksrc/scripts/kconfig/merge_config.sh" -m -O "$out" \
    "$out/.config" "${FRAGS[@]}" >/dev/null
kmake -s olddefconfig >&2
# Each symbol's last word across the fragments must hold: "CONFIG_X=v"
# verbatim, "# CONFIG_X is not set" as not =y/=m.
bad=$(cat "${FRAGS[@]}" | sed -nE 's/^(CONFIG_[A-Z0-9_]+)=.*/\1 &/p; s/^# (CONFIG_[A-Z0-9_]+) is not set$/\1 &/p' |
      awk '{ sym = $1; $1 = ""; last[sym] = substr($0, 2); if (!(sym in seen)) { seen[sym]; order[++n] = sym } }
           END { for (i = 1; i <= n; i++) print last[order[i]] }' |
      while IFS= read -r want; do
        case $want in
        "# "*) sym=${want#\# }; sym=${sym%% *}
               ! grep -qE "^$sym=[ym]$" "$out/.config" || echo "$want" ;;
        *) grep -qxF "$want" "$out/.config" || echo "$want" ;;
        esac
      done)
[ -z "$bad" ] || die "Kconfig refused: $(echo $bad) (is Rust available? make LLVM=$LLVM rustavailable)"

step "kernel $kver: building (about 15 minutes on 2 cores; log: $out/build.log)"
start=$SECONDS
kmake -j"$(nproc)" bzImage modules > "$out/build.log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
    sleep 30
    kill -0 $pid 2>/dev/null || break
    printf '  kernel build: %4d objects, %dm%02ds\n' \
        "$(grep -cE '^\s+(CC|RUSTC|AS)' "$out/build.log")" $(((SECONDS-start)/60)) $(((SECONDS-start)%60)) >&2
done
wait $pid || { tail -n 30 "$out/build.log" >&2; die "kernel build failed"; }
touch "$out/.complete"
ok "kernel built in $((SECONDS-start)) s"
echo "$out"

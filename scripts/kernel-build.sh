#!/usr/bin/env bash
# Configure and build the test kernel into the cache; print the build directory.
# Key: kernel version + config fragment + toolchain, so a changed input gets a
# fresh tree and an unchanged one is reused without running make at all.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

FRAG=$REPO_DIR/scripts/kconfig/test-kernel.config
LLVM=${LLVM:--19}
ksrc=$("$REPO_DIR/scripts/kernel-source.sh")
kver=$(make -s -C "$ksrc" kernelversion)
key=$( { echo "$kver"; cat "$FRAG"; rustc --version; clang$LLVM --version | head -n1;
         bindgen --version; } | sha256sum | cut -c1-12)
out=${KBUILD_OUT:-$CACHE_DIR/build/linux-$kver-$key}
if [ -f "$out/.complete" ]; then echo "$out"; exit 0; fi

mkdir -p "$out"
kmake() { make -C "$ksrc" O="$out" LLVM="$LLVM" "$@"; }
step "kernel $kver: configuring in $out"
kmake -s allnoconfig >&2
KCONFIG_CONFIG="$out/.config" "$ksrc/scripts/kconfig/merge_config.sh" -m -O "$out" \
    "$out/.config" "$FRAG" >/dev/null
kmake -s olddefconfig >&2
bad=$(grep -E '^CONFIG_[A-Z0-9_]+=' "$FRAG" | while IFS= read -r want; do
        grep -qxF "$want" "$out/.config" || echo "$want"; done)
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

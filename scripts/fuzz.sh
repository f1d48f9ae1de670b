#!/usr/bin/env bash
# Fuzz every decoder of the protocol core (proto/fuzz) for a while.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Installs what it lacks (a minimal nightly toolchain, cargo-fuzz), builds
# the targets with overflow checks on (as the kernel builds), runs each one
# for SECONDS_PER_TARGET, prints one line per target and a summary, and
# exits non-zero if any target crashed. Crash inputs land in
# proto/fuzz/artifacts/<target>/.
set -uo pipefail

secs=${1:-60}
case $secs in
'' | *[!0-9]*)
	echo "usage: $0 [SECONDS_PER_TARGET]" >&2
	exit 2
	;;
esac

fuzz_dir=$(cd "$(dirname "$0")/../proto/fuzz" && pwd)
cd "$fuzz_dir" || exit 1

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
	rustup toolchain install nightly --profile minimal || exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
	cargo install --locked cargo-fuzz || exit 1
fi

# No unsafe code to sanitise: plain libFuzzer runs several times faster.
fuzz_flags=(--sanitizer none)

if ! cargo +nightly fuzz build "${fuzz_flags[@]}"; then
	echo "fuzz: build failed"
	echo "0 passed, 1 failed"
	exit 1
fi

passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in $(cargo +nightly fuzz list); do
	mkdir -p "corpus/$target"
	# corpus/ is the fuzzer's scratch space (ignored by git); seeds/ holds
	# well-formed headers of every kind so runs start deep in the decoders.
	if cargo +nightly fuzz run "${fuzz_flags[@]}" "$target" "corpus/$target" seeds -- \
		-max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
		runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
		echo "fuzz $target: ok (${runs:-?} runs)"
		passed=$((passed + 1))
	else
		echo "fuzz $target: FAILED"
		grep -E 'panicked|SUMMARY|Test unit written|ERROR' "$log" | head -20
		failed=$((failed + 1))
	fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# Micro-benchmark of the protocol core's header codec (not a test):
# prints ns/op for encode and decode of a typical v1 and v2 header.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p rpcrdma-proto --bench codec "$@"

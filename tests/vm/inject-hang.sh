# Runner self-test: never finish. The runner must kill us and report it.
# shellcheck shell=sh
while :; do sleep 3600; done

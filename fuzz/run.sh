#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for SECONDS (default 60). Exits non-zero
# when a target crashes, leaks, times out or fails to build; the input that did it is
# left in fuzz/.build/artifacts.
#
# The targets are compiled with swiftc straight from the package's PushWire, PushSession,
# PushClock and PushProviderAPI sources (each a static library with fuzzer and address
# sanitizer instrumentation), so the SwiftPM build of the package is untouched. Seeds come
# from protocol/vectors and the README's HTTP examples; the corpus grows in
# fuzz/.build/corpus and is reused by later runs.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-60}
case "$seconds" in
    ''|*[!0-9]*) echo "usage: fuzz/run.sh [SECONDS]" >&2; exit 2 ;;
esac

out=.build
mkdir -p "$out/artifacts"
flags=(-sanitize=fuzzer,address -parse-as-library -O -g)

# ld.gold warns about every sanitizer symbol it cannot export; nothing else is hidden.
quiet() { "$@" 2> >(grep -v "ld.gold: warning: Cannot export local symbol" >&2); }

library() {
    local name=$1; shift
    quiet swiftc "${flags[@]}" -wmo -module-name "$name" -I "$out" -emit-module -emit-module-path "$out/$name.swiftmodule" \
        -emit-library -static -o "$out/lib$name.a" "$@"
}

echo "fuzz: building"
library PushWire $(find ../Sources/PushWire -name '*.swift' | sort)
library PushSession ../Sources/PushSession/*.swift
library PushClock ../Sources/PushClock/*.swift
library PushProviderAPI ../Sources/PushProviderAPI/*.swift
quiet swiftc "${flags[@]}" -I "$out" -L "$out" -lPushWire SplitMix.swift WireDecoder.swift -o "$out/fuzz-wire-decoder"
quiet swiftc "${flags[@]}" -I "$out" -L "$out" -lPushSession -lPushWire SplitMix.swift SessionReadPath.swift -o "$out/fuzz-session-read-path"
quiet swiftc "${flags[@]}" -I "$out" -L "$out" -lPushProviderAPI -lPushClock -lPushWire HTTPRequestPath.swift ../Sources/PushEventLoop/HTTPRequestHead.swift \
    -o "$out/fuzz-http-request-path"
python3 make_corpus.py "$out/seeds"

status=0
for target in wire-decoder session-read-path http-request-path; do
    mkdir -p "$out/corpus/$target"
    echo "fuzz: $target for ${seconds} s"
    if "$out/fuzz-$target" "$out/corpus/$target" "$out/seeds/$target" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -artifact_prefix="$out/artifacts/$target-" -print_final_stats=1 > "$out/$target.log" 2>&1; then
        grep -E "^Done|exec_per_sec|new_units_added" "$out/$target.log" | sed "s/^/  /"
    else
        status=1
        echo "fuzz: $target FAILED; the end of its log ($out/$target.log):"
        tail -n 60 "$out/$target.log"
        ls "$out/artifacts" | sed "s/^/  artifact: /"
    fi
done
exit $status

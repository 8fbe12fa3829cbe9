#!/usr/bin/env bash
# Runs the whole test suite N times in a row (default 10) while a CPU hog keeps every core
# busy, to find tests that pass only on an idle machine. Builds once first, then runs
# `swift test --skip-build` each time. Prints `N passed, M failed` (runs, not tests), then
# the failing tests of each failed run; every run's log stays in the directory it names.
# Exits non-zero if any run failed.
#
#   scripts/stress-tests.sh 10
#   SECUREPUSH_REQUIRE_POSTGRES=1 SECUREPUSH_REQUIRE_NATS=1 scripts/stress-tests.sh 10
#
# The hog is one `yes > /dev/null` per core at normal priority, so the tests get about half
# of the machine, as beside a build or another suite; it is stopped on exit, however the
# script ends.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${1:-10}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [N]  (N runs of the whole suite under CPU load, default 10)" >&2
    exit 2
fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/securepush-stress-XXXXXX")
echo "logs: $logs"

echo "building..."
if ! swift build --build-tests >"$logs/build.log" 2>&1; then
    tail -30 "$logs/build.log"
    echo "the build failed: $logs/build.log" >&2
    exit 1
fi

hogs=()
stop_hogs() {
    for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null; done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "$(nproc)"); do
    yes >/dev/null &
    hogs+=("$!")
done
echo "CPU hog: ${#hogs[@]} processes (${hogs[*]})"

passed=0
failed=0
report=()
for run in $(seq "$runs"); do
    log="$logs/run-$run.log"
    started=$SECONDS
    swift test --skip-build >"$log" 2>&1
    status=$?
    took=$((SECONDS - started))
    # swift-testing: `✘ Test name() failed after 1.2 seconds with 1 issue.` (a display name
    # is quoted); XCTest: `Test Case '-[Suite test]' failed`.
    names=$(grep -aE '^. Test .* failed after' "$log" | grep -av 'Test run with' \
                | sed -E 's/^. Test (.*) failed after.*/\1/' ; \
            grep -aE "^Test Case '.*' failed" "$log" | sed -E "s/^Test Case '(.*)' failed.*/\1/")
    summary=$(grep -aE 'Test run with [0-9]+ tests?' "$log" | tail -1)
    if [ "$status" -eq 0 ] && [ -n "$summary" ]; then
        passed=$((passed + 1))
        echo "run $run: passed in ${took} s: $summary"
    else
        failed=$((failed + 1))
        echo "run $run: FAILED (exit $status) in ${took} s: ${summary:-no summary line} ($log)"
        if [ -z "$names" ]; then
            names="(no failing test named; the last lines of $log:)"$'\n'"$(tail -5 "$log")"
        fi
        report+=("run $run:"$'\n'"$(printf '%s\n' "$names" | sed 's/^/  /')")
    fi
done

stop_hogs
echo "$passed passed, $failed failed"
for entry in "${report[@]}"; do printf '%s\n' "$entry"; done
echo "logs: $logs"
[ "$failed" -eq 0 ]

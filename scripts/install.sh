#!/usr/bin/env bash
# Installs securepush: a release build of the `securepush` executable into PREFIX/bin,
# the README into PREFIX/share/doc/securepush, and the systemd units of the store and
# the gateway into PREFIX/lib/systemd/system (their paths rewritten to PREFIX).
#
#   scripts/install.sh [PREFIX]        PREFIX defaults to /usr/local
#
# SECUREPUSH_BINARY=PATH installs that executable instead of building one (for a binary
# built elsewhere, and for the tests). Run it from anywhere; it builds the clone it is in.
set -euo pipefail

prefix="${1:-/usr/local}"
case "$prefix" in
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    /*) ;;
    *) echo "install.sh: PREFIX must be an absolute path, not '$prefix'" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"

binary="${SECUREPUSH_BINARY:-}"
if [ -z "$binary" ]; then
    # The Swift runtime is linked in, so the binary does not need the toolchain (which a
    # unit's ProtectHome= would hide when it lives in a home directory); its own build
    # directory keeps it from rebuilding `swift run -c release`'s and the other way round.
    build=(swift build -c release --product securepush --static-swift-stdlib --scratch-path "$root/.build-install")
    echo "building: ${build[*]}"
    (cd "$root" && "${build[@]}")
    binary="$(cd "$root" && "${build[@]}" --show-bin-path)/securepush"
fi
if [ ! -x "$binary" ]; then
    echo "install.sh: no executable at $binary" >&2
    exit 1
fi

install -d -m 755 "$prefix/bin"
install -m 755 "$binary" "$prefix/bin/securepush"
echo "installed $prefix/bin/securepush"

docs="$prefix/share/doc/securepush"
install -d -m 755 "$docs"
install -m 644 "$root/README.md" "$docs/README.md"
echo "installed $docs/README.md"

units="$prefix/lib/systemd/system"
install -d -m 755 "$units"
for unit in securepush-store.service securepush-gateway.service; do
    sed "s|/usr/local/|$prefix/|g" "$root/deploy/$unit" > "$units/$unit.tmp"
    chmod 644 "$units/$unit.tmp"
    mv "$units/$unit.tmp" "$units/$unit"
    echo "installed $units/$unit"
done

case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "note: $prefix/bin is not on PATH; add it, e.g. export PATH=\"$prefix/bin:\$PATH\"" ;;
esac

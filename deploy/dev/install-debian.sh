#!/bin/sh
# Makes sure the programs a test or tool needs are there, installing Debian's packages that carry them
# when missing (as root, with apt-get): install-debian.sh "BINARY..." "PACKAGE..." "WHAT THEY ARE FOR".
# Nothing is started: a package's service stays stopped (the tests run private instances).
set -eu

binaries=$1
packages=$2
purpose=$3

# Debian puts some servers in /usr/sbin, which a non-login PATH may lack.
find_binary() {
    for dir in $(echo "$PATH" | tr ':' ' ') /usr/sbin /usr/local/sbin /usr/bin /usr/local/bin; do
        if [ -x "$dir/$1" ]; then
            return 0
        fi
    done
    return 1
}

have_binaries() {
    for binary in $binaries; do
        find_binary "$binary" || return 1
    done
}

have_binaries && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: $binaries not found: $purpose." >&2
    echo "  Debian/Ubuntu: sudo apt-get install -y $packages" >&2
    exit 1
fi

echo "installing Debian's $packages ($purpose; no service is started)"
# Debian's maintainer scripts start a package's service unless policy-rc.d says no.
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    added_policy=1
fi
status=0
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # (several packages)
apt-get install -y -q --no-install-recommends $packages >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $packages >/dev/null; } \
    || status=$?
if [ -n "$added_policy" ]; then
    rm -f "$policy"
fi
if [ "$status" != 0 ]; then
    echo "error: apt-get install $packages failed (exit $status)" >&2
    exit "$status"
fi
have_binaries || { echo "error: $packages installed but one of $binaries was not found" >&2; exit 1; }

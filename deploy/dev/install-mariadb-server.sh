#!/bin/sh
# Makes sure MariaDB's server binaries are there for the real-stack tests
# (make mariadb-server), and openssl, which makes the certificates of its TLS.
# The tests start their own private instance; this
# script never starts, stops or configures the machine's MariaDB service.
set -eu

# Debian puts mariadbd in /usr/sbin, which a non-login PATH may lack.
find_binary() {
    for dir in $(echo "$PATH" | tr ':' ' ') /usr/sbin /usr/local/sbin /usr/bin /usr/local/bin; do
        if [ -x "$dir/$1" ]; then
            return 0
        fi
    done
    return 1
}

have_binaries() {
    find_binary mariadbd && find_binary mariadb-install-db && find_binary openssl
}

have_binaries && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "error: MariaDB's server (mariadbd, mariadb-install-db) or openssl is not installed." >&2
    echo "  The real-stack tests need MariaDB 10.11 or newer, and openssl:" >&2
    echo "  Debian/Ubuntu: sudo apt-get install -y mariadb-server openssl" >&2
    echo "  RHEL/Fedora:   sudo dnf install -y mariadb-server openssl" >&2
    exit 1
fi

echo "installing Debian's mariadb-server and openssl (its service is not started: the tests run a private instance)"
# Debian's maintainer scripts start the service unless policy-rc.d says no.
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    added_policy=1
fi
status=0
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends mariadb-server openssl >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends mariadb-server openssl >/dev/null; } \
    || status=$?
if [ -n "$added_policy" ]; then
    rm -f "$policy"
fi
if [ "$status" != 0 ]; then
    echo "error: apt-get install mariadb-server openssl failed (exit $status)" >&2
    exit "$status"
fi
have_binaries || { echo "error: mariadb-server and openssl installed but mariadbd or openssl was not found" >&2; exit 1; }

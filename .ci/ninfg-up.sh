#!/usr/bin/env bash
# Unpack the Ninf-G 5.0.0 client bundle for the real-client tests (tests/ninfg_real/).
#
# Usage (as root on Debian 12, or as anyone when the packages are there):
#   bash .ci/ninfg-up.sh          # the bundle and what building from IDL needs
#   bash .ci/ninfg-up.sh --sshd   # and /usr/sbin/sshd, for benchmarks/ninfg_vs_ssh.py (the
#                                 # package's own sshd service is kept from starting)
#
# The bundle is ${GAHP_SHARED:-<repo>/../shared}/ninfg/ninfg-5.0.0-debian12-x86_64.tar.xz.  It is
# unpacked into $GAHP_NINFG_DIR (default /tmp/gahp-ninfg), so NG_DIR is
# $GAHP_NINFG_DIR/ninfg-5.0.0, where the tests look for it.  The Debian packages needed to
# build clients and executables from IDL and to run them are installed with apt-get when
# missing.  Idempotent: an unpacked tree that is complete is kept.  Prints NG_DIR on stdout;
# fails loudly (non-zero, a message on stderr) when anything is missing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${GAHP_SHARED:-$REPO/../shared}"
TARBALL="$SHARED/ninfg/ninfg-5.0.0-debian12-x86_64.tar.xz"
DIR="${GAHP_NINFG_DIR:-/tmp/gahp-ninfg}"
NG_DIR="$DIR/ninfg-5.0.0"
PKGS=(gcc make libc6-dev libtirpc-dev libtirpc3 zlib1g-dev python3)
NEEDED=(bin/ng_gen bin/ng_cc bin/ng_invoke_server.SSH bin/ng_information_service.NRF
        lib/libngclient.a lib/libngexecutable.a test-kit/run-sample.sh test-kit/ng-is-tap
        test-kit/sample/ng_test_client.c)

log() { printf 'ninfg-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

missing_packages() {
    local p
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
            printf '%s\n' "$p"
    done
}

install_packages() {
    command -v dpkg-query >/dev/null || die "not a Debian system: install ${PKGS[*]} by hand"
    local missing
    mapfile -t missing < <(missing_packages)
    [ "${#missing[@]}" -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || die "packages missing (${missing[*]}): run as root to install them"
    log "installing ${missing[*]}"
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
}

complete() {
    local f
    for f in "${NEEDED[@]}"; do [ -e "$NG_DIR/$f" ] || return 1; done
}

unpack() {
    complete && { log "already unpacked in $NG_DIR"; return 0; }
    [ -f "$TARBALL" ] || die "no bundle at $TARBALL (set GAHP_SHARED)"
    mkdir -p "$DIR"
    local tmp
    tmp="$(mktemp -d "$DIR/.unpack.XXXXXX")"
    tar -xJf "$TARBALL" -C "$tmp" || { rm -rf "$tmp"; die "cannot unpack $TARBALL"; }
    [ -x "$tmp/ninfg-5.0.0/bin/ng_gen" ] || { rm -rf "$tmp"; die "$TARBALL has no ninfg-5.0.0/"; }
    rm -rf "$NG_DIR"
    mv "$tmp/ninfg-5.0.0" "$NG_DIR"
    rmdir "$tmp"
    complete || die "$NG_DIR is incomplete after unpacking"
    log "unpacked into $NG_DIR"
}

install_sshd() {
    [ -x /usr/sbin/sshd ] && return 0
    [ "$(id -u)" = 0 ] || die "no /usr/sbin/sshd: run as root to install openssh-server"
    log "installing openssh-server (its service is not started)"
    local policy=/usr/sbin/policy-rc.d had_policy=0
    [ -e "$policy" ] && had_policy=1
    [ "$had_policy" = 1 ] || printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    local ok=1
    apt-get update -qq >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        openssh-server >&2 || ok=0
    [ "$had_policy" = 1 ] || rm -f "$policy"
    [ "$ok" = 1 ] || die "apt-get install openssh-server failed"
}

install_packages
[ "${1:-}" = "--sshd" ] && install_sshd
unpack
"$NG_DIR/bin/ng_version" >/dev/null 2>&1 || die "$NG_DIR/bin/ng_version does not run"
printf '%s\n' "$NG_DIR"

#!/usr/bin/env bash
# Install the C ABI: libnetdirect.so and libnetdirect.a, the headers, and netdirect.pc.
#
#   scripts/install-c.sh [PREFIX]        (default /usr/local; builds the release library first)
#
# Layout under PREFIX:
#   lib/libnetdirect.so, lib/libnetdirect.a, lib/pkgconfig/netdirect.pc
#   include/netdirect/{ndspi.h,nddef.h,ndstatus.h,ndsupport.h,...}
#   include/netdirect/win32/{windows.h,winsock2.h,...}   (the Win32 compatibility layer)
# Then: cc prog.c $(pkg-config --cflags --libs netdirect)
#
# NETDIRECT_LIB_DIR names a directory that already holds the built libraries (the tests use
# it to install a debug build); without it, `cargo build --release -p netdirect-ffi` runs.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-/usr/local}"
libsrc="${NETDIRECT_LIB_DIR:-}"
if [ -z "$libsrc" ]; then
    cargo build --release -p netdirect-ffi
    libsrc="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release"
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)"
install -d "$prefix/lib/pkgconfig" "$prefix/include/netdirect/win32"
install -m 0755 "$libsrc/libnetdirect.so" "$prefix/lib/libnetdirect.so"
install -m 0644 "$libsrc/libnetdirect.a" "$prefix/lib/libnetdirect.a"
install -m 0644 include/*.h "$prefix/include/netdirect/"
install -m 0644 include/win32/*.h "$prefix/include/netdirect/win32/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" crates/ffi/netdirect.pc.in \
    > "$prefix/lib/pkgconfig/netdirect.pc"
echo "installed netdirect $version under $prefix"

#!/usr/bin/env bash
# Fetch the Linux 7.3 source tree into the cache and print its path.
#   KSRC=/path   use an existing tree instead (printed back as is).
# Order: Debian's linux-source-7.3 through a private apt configuration (the
# machine's own sources are not touched), then a kernel.org tarball.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

KVER=${KVER:-7.3}
if [ -n "${KSRC:-}" ]; then
    [ -f "$KSRC/Makefile" ] || die "KSRC=$KSRC has no Makefile"
    echo "$KSRC"; exit 0
fi

dest=$CACHE_DIR/src/linux-$KVER
if [ -f "$dest/.complete" ]; then echo "$dest"; exit 0; fi

work=$CACHE_DIR/src/.fetch-$KVER
rm -rf "$work" "$dest"; mkdir -p "$work/lists/partial" "$work/archives/partial"
echo "deb http://deb.debian.org/debian trixie-backports main" > "$work/sources.list"
apt_private=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=-
             -o Dir::State::Lists="$work/lists" -o Dir::Cache::Archives="$work/archives"
             -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o Debug::NoLocking=1
             -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
tarball=
step "kernel source: linux-source-$KVER from Debian (private apt configuration)"
if apt-get "${apt_private[@]}" -q update >&2 &&
   (cd "$work" && apt-get "${apt_private[@]}" -q download "linux-source-$KVER" >&2); then
    deb=$(ls "$work"/linux-source-"$KVER"_*.deb | head -n1)
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards '*/linux-source-*.tar.xz'
    tarball=$(ls "$work"/usr/src/linux-source-"$KVER".tar.xz)
else
    step "kernel source: Debian failed, trying kernel.org"
    url=https://cdn.kernel.org/pub/linux/kernel/v${KVER%%.*}.x/linux-$KVER.tar.xz
    curl -fL --progress-bar -o "$work/linux.tar.xz" "$url" >&2 || die "cannot fetch the kernel source"
    tarball=$work/linux.tar.xz
fi
step "kernel source: unpacking"
mkdir -p "$work/tree"
tar -xf "$tarball" -C "$work/tree" --strip-components=1
mv "$work/tree" "$dest"
touch "$dest/.complete"
rm -rf "$work"
echo "$dest"

#!/usr/bin/env bash
# A release an operator can copy anywhere: target/dist/topo-tune-VERSION-ARCH-linux.tar.gz
# with the binary, topo-tune's NCCL tuner plugin beside it (libnccl_tuner_topo_tune.so: where
# `tune` looks for it, what it copies to the nodes), its man page, shell completions, LICENSE
# and README.
#
# hwloc is linked statically (from the build machine's libhwloc-dev), so neither the
# controller nor the nodes topo-tune copies itself to need libhwloc15: the binary needs glibc
# (>= 2.34) and libudev.so.1, which every systemd distribution has. pkg-config links a
# library statically only when its .a lies outside the system directories, so the build
# points pkg-config at a private copy of hwloc.pc whose libdir holds a link to the system's
# libhwloc.a.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh build

multiarch=$(gcc -print-multiarch 2>/dev/null || true)
archive=""
for d in "/usr/lib/$multiarch" /usr/lib64 /usr/lib; do
  [ -f "$d/libhwloc.a" ] && archive="$d/libhwloc.a" && break
done
if [ -z "$archive" ]; then
  echo "dist: no libhwloc.a (libhwloc-dev ships it on Debian and Ubuntu)" >&2
  exit 1
fi
private=target/dist/hwloc-static
rm -rf "$private"
mkdir -p "$private/lib"
ln -s "$archive" "$private/lib/libhwloc.a"
pc=$(pkg-config --variable=pcfiledir hwloc)/hwloc.pc
sed "s#^libdir=.*#libdir=$(pwd)/$private/lib#" "$pc" >"$private/hwloc.pc"

export CARGO_TARGET_DIR=target/dist/build
PKG_CONFIG_PATH="$(pwd)/$private" cargo build --release --locked --workspace
bin=$CARGO_TARGET_DIR/release/topo-tune
plugin=$CARGO_TARGET_DIR/release/libnccl_tuner_topo_tune.so
if ! readelf --dyn-syms "$plugin" | grep -q "ncclTunerPlugin_v6"; then
  echo "dist: $plugin does not export ncclTunerPlugin_v6: not a release" >&2
  exit 1
fi
if readelf -d "$bin" | grep -q 'libhwloc'; then
  echo "dist: $bin still needs libhwloc.so: not a release" >&2
  exit 1
fi

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
name=topo-tune-$version-$(uname -m)-linux
stage=target/dist/$name
rm -rf "$stage"
mkdir -p "$stage/completions"
cp "$bin" "$plugin" LICENSE README.md "$stage/"
"$bin" man >"$stage/topo-tune.1"
for shell in bash zsh fish; do
  "$bin" completions "$shell" >"$stage/completions/topo-tune.$shell"
done
tar -C target/dist -czf "target/dist/$name.tar.gz" "$name"
echo "dist: target/dist/$name.tar.gz ($(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' '))" >&2

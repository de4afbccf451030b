#!/usr/bin/env bash
# Install the system packages topo-tune needs (Debian/Ubuntu), once. Idempotent: does nothing
# when everything is already there.
#
#   ./scripts/setup.sh build   what building topo-tune and running the example need
#   ./scripts/setup.sh test    that, and the test world: sshd, Slurm, munge, Ansible's venv,
#                              a Debian 13 root for Slurm's block plugin (the default)
set -euo pipefail

profile=${1:-test}
case "$profile" in
  build|test) ;;
  *) echo "setup: unknown profile '$profile' (build or test)" >&2; exit 2 ;;
esac

packages=(
  build-essential   # cc, for crates that build C
  pkg-config        # finds libhwloc
  libhwloc-dev      # hwloc 2.x: CPUs, NUMA and the PCI tree (and libhwloc15 at run time)
  libudev-dev       # libhwloc's static link line names -ludev
)
if [ "$profile" = test ]; then
  packages+=(
    hwloc-nox       # lstopo: the tests compare topo-tune against hwloc's own tool
    openssh-client  # ssh: topo-tune reaches nodes through the operator's own ssh
    openssh-server  # sshd: the tests start real sshd instances on loopback
    systemd         # systemd-analyze: the tests verify the irq-pin unit
    python3         # runs the nccl-tests double (tests/data/nccl-tests/fake_all_reduce_perf)
    python3-venv    # the Ansible test installs ansible-core from PyPI into a venv
    slurmctld       # the Slurm test starts Debian's slurmctld on the topology.conf plan writes
    slurm-client    # scontrol show topology
    munge           # Slurm's authentication, started by the test on a private socket
    man-db          # man -l: the test renders `topo-tune man`
    debootstrap     # makes the Debian 13 root whose Slurm 24.11 has topology/block (below)
  )
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install Rust with rustup (https://rustup.rs) first" >&2
  exit 1
fi
# The oldest Rust the locked dependencies build with (Cargo.toml's rust-version; serde-saphyr
# 2.2 needs 1.89). Distribution packages are often older (Debian 12's rustc is 1.63).
need=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml")
have=$(rustc --version 2>/dev/null | awk '{print $2}')
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
  echo "setup: rustc ${have:-not found} is older than $need, which topo-tune's locked dependencies need;" >&2
  echo "       install a current toolchain with rustup (https://rustup.rs): rustup toolchain install stable" >&2
  exit 1
fi
# Slurm's block plugin (topology/block, for NVLink domains) is in Slurm 23.11 and later; Debian
# 12 has 22.05. The Slurm test runs Debian 13's slurmctld 24.11 in a minimal Debian 13 root
# (debootstrap, about 220 MB, half a minute), made once here.
block_root=${TOPO_TUNE_SLURM_BLOCK_ROOT:-/var/lib/topo-tune-tests/trixie}
need_root=0
[ "$profile" = test ] && [ ! -x "$block_root/usr/sbin/slurmctld" ] && need_root=1
[ ${#missing[@]} -eq 0 ] && [ $need_root -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "setup: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_root -eq 1 ]; then
  echo "setup: making a Debian 13 root with Slurm 24.11 in $block_root" >&2
  "${sudo[@]}" rm -rf "$block_root.part"
  "${sudo[@]}" mkdir -p "$(dirname "$block_root")"
  "${sudo[@]}" debootstrap --variant=minbase trixie "$block_root.part" http://deb.debian.org/debian >/dev/null
  "${sudo[@]}" chroot "$block_root.part" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurmctld slurm-client munge' >/dev/null 2>&1 ||
    { echo "setup: installing Slurm into $block_root.part failed (run the chroot apt-get by hand to see why)" >&2; exit 1; }
  "${sudo[@]}" mv "$block_root.part" "$block_root"
fi

#!/usr/bin/env bash
# Time `topo-tune plan` end to end on generated clusters of simulated nodes (8 GPUs each,
# 32 nodes per rack, 8 racks per leaf, 16 leaves per spine, 8 rails), and on the same plans
# from snapshot files (`--from-probes`, made once with `init --collect-only`).
# Prints wall time, peak memory (max RSS) and CPU use per run: docs/performance.md.
#
#   scripts/bench/scale.sh [NODES ...]        default: 4096 16384
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --locked
command -v /usr/bin/time > /dev/null || { echo "needs GNU time: apt-get install time" >&2; exit 1; }
bin=$PWD/target/release/topo-tune
work=$(mktemp -d /tmp/topo-tune-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
sizes=("${@:-4096}")
[ $# -eq 0 ] && sizes=(4096 16384)
gen() { # NODES FILE
  python3 - "$1" "$2" <<'PY'
import sys
n, out = int(sys.argv[1]), sys.argv[2]
racks = max(1, n // 32)
y = ['nccl_version: "2.28.9"', 'fabric:', '  leaves:']
for l in range((racks + 7) // 8):
    y.append(f'    leaf-{l+1}: {{spine: spine-{l//16+1}, uplink_gbps: 3200}}')
y.append('  racks:')
for r in range(racks):
    y.append(f'    rack-{r+1}: {{leaf: leaf-{r//8+1}}}')
y += ['  rails: 8', 'nodes:']
for r in range(racks):
    a = r * 32 + 1
    y += [f'  - host: "n[{a:05d}-{a+31:05d}]"', f'    labels: {{rack: rack-{r+1}}}', '    simulate: aws-p5en']
open(out, 'w').write('\n'.join(y) + '\n')
PY
}
measure() { # LABEL ARGS...
  local label=$1; shift
  /usr/bin/time -f "$label: %e s wall, %M KB max RSS, %P CPU" "$bin" "$@" > /dev/null 2> "$work/time" || { cat "$work/time"; exit 1; }
  tail -1 "$work/time"
}
for n in "${sizes[@]}"; do
  gen "$n" "$work/c$n.yaml"
  measure "plan, $n simulated nodes" plan --cluster-config "$work/c$n.yaml"
  "$bin" init --cluster-config "$work/c$n.yaml" --collect-only --output-dir "$work/p$n" > /dev/null
  measure "plan, $n nodes --from-probes" plan --cluster-config "$work/c$n.yaml" --from-probes "$work/p$n"
  rm -rf "$work/p$n"
done
echo "($(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"

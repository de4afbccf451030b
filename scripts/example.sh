#!/usr/bin/env bash
# The main job on the bundled examples/cluster.yaml: six simulated nodes (AWS p5en and Azure
# NDv5, from real topology files) collected into out/, then one of them shown as the
# nvidia-smi-style path matrix. No GPU, no ssh needed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --quiet
./target/release/topo-tune init --cluster-config examples/cluster.yaml --collect-only --output-dir out
echo
./target/release/topo-tune probe --from-hwloc-xml profiles/aws-p5en.xml --matrix

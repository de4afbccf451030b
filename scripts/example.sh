#!/usr/bin/env bash
# Run topo-tune on a bundled real topology (AWS p5en.48xlarge, 8×H200, 16 EFA): the snapshot
# summary, then the GPU/NIC path matrix. No GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo build --release --quiet
topology=profiles/aws-p5en.xml
./target/release/topo-tune probe --from-hwloc-xml "$topology"
echo
./target/release/topo-tune probe --from-hwloc-xml "$topology" --matrix

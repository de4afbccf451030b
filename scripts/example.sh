#!/usr/bin/env bash
# The main job on the bundled examples/cluster.yaml: ten simulated nodes (eight AWS p5en and two
# Azure NDv5, from real topology files) probed, planned and given their NCCL files under
# out/<host>/etc/..., then the plan (rings, node order, predicted busbw) and one node's
# path matrix. No GPU, no ssh needed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what building and running the example needs: no sshd, Slurm or test root.
./scripts/setup.sh build
echo "example: building the release binary (a few minutes the first time)" >&2
cargo build --release
echo "example: the binary is target/release/topo-tune (cargo install --locked --path . puts it in ~/.cargo/bin)" >&2
./target/release/topo-tune init --cluster-config examples/cluster.yaml --output-dir out
echo
./target/release/topo-tune plan --cluster-config examples/cluster.yaml --output-dir out/plan
echo
./target/release/topo-tune probe --from-hwloc-xml profiles/aws-p5en.xml --matrix

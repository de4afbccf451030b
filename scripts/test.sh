#!/usr/bin/env bash
# Everything CI checks: formatting, clippy with warnings as errors, the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings
cargo test --locked

#!/usr/bin/env bash
# Everything CI checks: formatting, clippy with warnings as errors, the whole test suite.
# The crash-injection hook is compiled in for the tests only (--features fault-injection).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh test
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
cargo test --workspace --all-features --locked

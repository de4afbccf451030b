#!/usr/bin/env bash
# topo-tune doctor as Slurm's HealthCheckProgram (slurm.conf) or in a Prolog.
#
#   HealthCheckProgram=/usr/local/sbin/topo-tune-healthcheck
#   HealthCheckInterval=300
#   # or: Prolog=/usr/local/sbin/topo-tune-healthcheck
#
# A failing check (exit 5) drains this node with a one-line reason naming the checks, so
# `sinfo -R` says why. Anything else topo-tune cannot answer is logged and does not drain:
# the health check is about the node, not about the tool. Reserved CPUs: RESERVE_CPUS.
set -uo pipefail

node=${SLURMD_NODENAME:-$(hostname -s)}
tt=${TOPO_TUNE:-/usr/local/bin/topo-tune}
args=(--output json doctor)
[ -n "${RESERVE_CPUS:-}" ] && args+=(--reserve-cpus "$RESERVE_CPUS")

out=$("$tt" "${args[@]}" 2>/dev/null)
rc=$?
case $rc in
  0) exit 0 ;;
  5)
    # The failing checks' ids, e.g. "mlx5-irq-placement,pcie-link".
    failed=$(printf '%s' "$out" | python3 -c 'import json,sys
d=json.load(sys.stdin)
print(",".join(c["check"] for n in d["nodes"] for c in n.get("checks",[]) if c["status"]=="fail"))' 2>/dev/null)
    reason="topo-tune doctor: ${failed:-failing checks} (topo-tune doctor on the node for the fix)"
    scontrol update nodename="$node" state=drain reason="${reason:0:120}"
    logger -t topo-tune "drained $node: $reason"
    # In a Prolog a non-zero exit also drains the node and requeues the job.
    exit 1 ;;
  *)
    logger -t topo-tune "doctor could not run on $node (exit $rc); node left as it is"
    exit 0 ;;
esac

#!/usr/bin/python
# -*- coding: utf-8 -*-
# topo-tune's Ansible module: runs one topo-tune command on the host the task runs on (the
# controller that reaches the GPU nodes, or a node itself for irq-pin/doctor) and reports
# what topo-tune's JSON envelope says. Check mode and diff mode map onto topo-tune's own
# --check/--dry-run and --diff, so nothing is guessed: topo-tune decides what would change.
# SPDX-License-Identifier: MIT OR Apache-2.0

DOCUMENTATION = r"""
module: topo_tune
short_description: Run topo-tune (init, irq-pin, doctor, rollback, status) and report its JSON
description:
  - Runs C(topo-tune --output json COMMAND) and sets C(changed) and C(failed) from topo-tune's
    envelope and exit code (docs/exit-codes.md).
  - Check mode runs C(init --check) or C(irq-pin --dry-run): nothing is written, C(changed) says
    whether something would be. C(rollback) has no check mode and is skipped in it.
  - Diff mode adds C(--diff) to C(init); each file's unified diff is returned as Ansible's
    native C(diff), one entry per node and file.
options:
  command:
    description: The topo-tune command.
    choices: [init, irq-pin, doctor, rollback, status]
    required: true
    type: str
  binary:
    description: Path of the topo-tune binary on the host the task runs on.
    default: /usr/local/bin/topo-tune
    type: path
  cluster_config:
    description: cluster.yaml (init, rollback, status; irq-pin and doctor act on the whole cluster with it, else on this host only).
    type: path
  output_dir:
    description: Write each node's files under DIR/<host> instead of on the node (init, rollback, status).
    type: path
  fsroot:
    description: irq-pin/doctor on a described /sys + /proc tree instead of this machine.
    type: path
  reserve_cpus:
    description: Training CPUs that get no NIC interrupt (irq-pin, doctor).
    type: str
  extra_args:
    description: More topo-tune arguments, appended as given.
    type: list
    elements: str
    default: []
  fail_on_partial:
    description: Fail the task when some nodes failed and others succeeded (exit 4). A run in which no node succeeded (exit 8) always fails.
    type: bool
    default: true
  fail_on_checks:
    description: Fail the task when doctor finds a failing check (exit 5).
    type: bool
    default: true
"""

RETURN = r"""
rc: {description: topo-tune's exit code, type: int}
msg: {description: topo-tune's one-line summary, type: str}
topo_tune: {description: topo-tune's whole JSON envelope, type: dict}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

# docs/exit-codes.md
OK, CHANGES_PENDING, PARTIAL, CHECKS_FAILED, DRIFT, ALL_FAILED = 0, 3, 4, 5, 6, 8


def command_line(p, check_mode, diff_mode):
    argv = [p["binary"], "--output", "json", p["command"]]
    if p["cluster_config"]:
        argv += ["--cluster-config", p["cluster_config"]]
    if p["output_dir"] and p["command"] in ("init", "rollback", "status"):
        argv += ["--output-dir", p["output_dir"]]
    if p["fsroot"] and p["command"] in ("irq-pin", "doctor"):
        argv += ["--fsroot", p["fsroot"]]
    if p["reserve_cpus"] and p["command"] in ("irq-pin", "doctor"):
        argv += ["--reserve-cpus", p["reserve_cpus"]]
    if check_mode and p["command"] == "init":
        argv.append("--check")
    if check_mode and p["command"] == "irq-pin":
        argv.append("--dry-run")
    if diff_mode and p["command"] == "init":
        argv.append("--diff")
    return argv + list(p["extra_args"])


def native_diff(doc):
    """One Ansible diff per node and file that topo-tune changed (or would change)."""
    out = []
    for node in doc.get("nodes", []):
        for f in node.get("files", []) or []:
            if f.get("diff"):
                # Ansible prints a prepared diff as it is: the first line names node and file.
                out.append({
                    "prepared": "# %s:%s (%s)\n%s" % (node.get("host"), f.get("path"), f.get("action"), f["diff"]),
                })
    return out


def failure(p, rc):
    """Why the task fails, or None."""
    if rc in (OK, CHANGES_PENDING, DRIFT):
        return None
    if rc == ALL_FAILED:
        return "no node succeeded"
    if rc == PARTIAL:
        return "some nodes failed" if p["fail_on_partial"] else None
    if rc == CHECKS_FAILED:
        return "doctor found failing checks" if p["fail_on_checks"] else None
    return "topo-tune exited %d" % rc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            command=dict(type="str", required=True, choices=["init", "irq-pin", "doctor", "rollback", "status"]),
            binary=dict(type="path", default="/usr/local/bin/topo-tune"),
            cluster_config=dict(type="path"),
            output_dir=dict(type="path"),
            fsroot=dict(type="path"),
            reserve_cpus=dict(type="str"),
            extra_args=dict(type="list", elements="str", default=[]),
            fail_on_partial=dict(type="bool", default=True),
            fail_on_checks=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode and p["command"] == "rollback":
        module.exit_json(changed=False, skipped=True, msg="rollback has no check mode: nothing was run")
    if module.check_mode and not os.path.exists(p["binary"]):
        # The install task would put it there first; nothing can be asked of it yet.
        module.exit_json(
            changed=True,
            msg="topo-tune is not installed at %s yet: a real run installs it, then runs %s" % (p["binary"], p["command"]),
        )
    argv = command_line(p, module.check_mode, module._diff)
    rc, out, err = module.run_command(argv)
    try:
        doc = json.loads(out)
    except ValueError:
        module.fail_json(msg="topo-tune did not answer JSON (exit %d): %s" % (rc, err.strip()[-2000:]), rc=rc, cmd=argv)
    result = dict(
        rc=rc,
        cmd=argv,
        msg=doc.get("msg", ""),
        topo_tune=doc,
        # In check mode "changed" is what would change: topo-tune's exit 3 says so.
        changed=bool(doc.get("changed")) or (module.check_mode and rc == CHANGES_PENDING),
    )
    if module._diff:
        result["diff"] = native_diff(doc)
    why = failure(p, rc)
    if why:
        result["msg"] = "%s: %s" % (why, result["msg"])
        module.fail_json(**result)
    # Ansible fails any result whose rc is not 0 unless it says otherwise: 3, 4 (allowed), 5
    # (allowed) and 6 are answers, not failures.
    module.exit_json(failed=False, **result)


if __name__ == "__main__":
    main()

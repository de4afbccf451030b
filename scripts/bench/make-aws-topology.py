#!/usr/bin/env python3
"""A large AWS DescribeInstanceTopology answer for timing `topo-tune fabric --from-aws-topology`
(docs/performance.md): INSTANCES p5 instances, PER_NODE of them under each bottom network node,
64 bottom nodes under each middle node, 16 middle nodes under each top node.

    python3 scripts/bench/make-aws-topology.py INSTANCES PER_NODE > answer.json
"""
import json
import sys

n, per = int(sys.argv[1]), int(sys.argv[2])
out = []
for i in range(n):
    bottom = i // per
    mid = bottom // 64
    top = mid // 16
    out.append({
        "InstanceId": "i-%017x" % (i + 1),
        "InstanceType": "p5.48xlarge",
        "NetworkNodes": ["nn-top%05d" % top, "nn-mid%06d" % mid, "nn-bot%07d" % bottom],
        "AvailabilityZone": "us-east-1a",
        "ZoneId": "use1-az6",
    })
json.dump({"Instances": out}, sys.stdout)

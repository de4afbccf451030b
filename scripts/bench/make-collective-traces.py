#!/usr/bin/env python3
"""Collective-heavy PyTorch profiler traces for `topo-tune diagnose --trace`'s memory bound:
RANKS files, each COLLECTIVES all-reduces (a `record_param_comms` CPU op, its
`cudaLaunchKernel`, its NCCL kernel), 1,000 per `ProfilerStep#N`, sizes cycling 4 KiB to
64 MiB. Nothing else: every event a rank keeps is a collective's.

    python3 scripts/bench/make-collective-traces.py RANKS COLLECTIVES OUTDIR
"""
import os
import sys


def rank_file(path, rank, ranks, count):
    with open(path, "w") as f:
        f.write('{"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":%d,"world_size":%d},'
                '"traceEvents":[\n' % (rank, ranks))
        t = 1_000_000
        first = True
        for i in range(count):
            if i % 1000 == 0:
                step = '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%d,"dur":%d}' % (
                    i // 1000, t, 1000 * 30)
                f.write(("" if first else ",\n") + step)
                first = False
            nelems = 1024 << (i % 15)
            c = i + 1
            f.write(',\n{"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1,"tid":1,"ts":%d,"dur":5,'
                    '"args":{"Collective name":"allreduce","In msg nelems":%d,"Out msg nelems":%d,"dtype":"Float",'
                    '"Group size":%d,"Process Group Name":"0"}}' % (t + 1, nelems, nelems, ranks))
            f.write(',\n{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":2,'
                    '"args":{"correlation":%d}}' % (t + 2, c))
            f.write(',\n{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",'
                    '"pid":0,"tid":7,"ts":%d,"dur":%d,"args":{"stream":7,"correlation":%d}}' % (t + 8, 10 + (rank == 3) * 5, c))
            t += 30
        f.write("\n]}\n")


def main(ranks, count, out):
    os.makedirs(out, exist_ok=True)
    for r in range(ranks):
        rank_file(os.path.join(out, "rank-%d.json" % r), r, ranks, count)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])

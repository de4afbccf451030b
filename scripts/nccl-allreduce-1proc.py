#!/usr/bin/env python3
# One-process NCCL all-reduce through PyTorch: enough for NCCL to load NCCL_CONF_FILE,
# NCCL_TOPO_FILE and NCCL_GRAPH_FILE and say so under NCCL_DEBUG=INFO. Run on a GPU machine.
import os, torch, torch.distributed as dist
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("allreduce ok", float(x[0]), "NCCL", torch.cuda.nccl.version())
dist.destroy_process_group()

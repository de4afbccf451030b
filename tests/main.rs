//! The integration tests: one binary (so `common` compiles once), one module per area. They
//! run the real `topo-tune` binary against fake `/sys` trees, real hwloc XML, hwloc's own
//! `lstopo`, and real sshd on loopback.

mod common;

mod ansible;
mod architecture;
mod artifacts;
mod bench_pdsh;
mod canary;
mod cli;
mod diagnose;
mod docs;
mod doctor;
mod fabric;
mod from_probes;
mod fuzz;
mod guard_property;
mod inventory;
mod irq;
mod nccl_files;
mod nccl_shapes;
mod nodes;
mod nvlink;
mod plan;
mod probe_fsroot;
mod probe_hwloc_xml;
mod root_safe;
mod schema;
mod setup_script;
mod simulate;
mod slurm;
mod ssh_collect;
mod tables;
mod trace;
mod tune;

// Package hostinfo measures what a slurmd reports about its host in
// MESSAGE_NODE_REGISTRATION_STATUS (reference §3), computed the way Slurm
// 22.05.8 does it so that slurmctld's checks ("Low RealMemory", "Node
// unexpectedly rebooted") see the same numbers a C slurmd would send:
//
//   - CPU topology as xcpuinfo_hwloc_topo_get derives it from hwloc (whole
//     system, online PUs): CPUs = online PUs, Sockets = packages holding
//     them, CoresPerSocket = cores/sockets, ThreadsPerCore = CPUs/cores,
//     Boards = 1 (integer division, as in C); read here from
//     /sys/devices/system/cpu, with an injectable root for tests;
//   - RealMemory = (float)phys_pages * page_size / 1 MiB (get_mach_stat.c);
//   - TmpDisk = statvfs(TmpFS) f_blocks*f_frsize / 1 MiB, 0 if TmpFS is absent;
//   - UpTime = sysinfo uptime (host uptime, not process uptime);
//   - CPULoad = sysinfo loads[1] (5 minutes) / 65536 * 100;
//   - FreeMem = freeram*mem_unit / 1 MiB;
//   - Arch = uname machine, OS = "sysname release version" ($SLURM_ARCH and
//     $SLURM_OS override them, as in slurmd); Hostname = short host name.
//
// Reported folds hardware and slurm.conf values into what is registered
// (slurmd.c _read_config): the configured topology unless the hardware has
// fewer CPUs and SlurmdParameters=config_overrides is not set.
//
// Not modelled: hwloc Group objects (Boards > 1),
// SlurmdParameters=l3cache_as_socket/numa_node_as_socket, dynamic nodes
// (-Z/-F) and the cached hwloc XML in the spool directory.
//
// All functions are safe to call from any goroutine.
package hostinfo

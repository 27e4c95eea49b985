// Package sack is SACK, the unix-socket token service of Slurm's
// auth/slurm (24.11, 26.05): the wire protocol, a Server that a node
// daemon runs at /run/slurm/sack.socket for local clients (srun, scontrol,
// sinfo, a stock slurmstepd) and a Client that asks one for tokens.
//
// One request per connection; all integers big-endian:
//
//	request  u16 version | u32 length (bytes after version) | u32 rpc | body
//	CREATE   rpc 64001, body u32 r_uid | packmem(data)  ->  packstr(token)
//	VERIFY   rpc 64002, body packstr(token)             ->  u32 rc
//
// The server learns who asks from SO_PEERCRED and mints a "sack" token for
// that uid/gid through its Service (authslurm.Auth). VERIFY answers 0 on
// success; on failure 24.11 answers 0xffffffff and 26.05 closes without an
// answer (Config.Version picks). A request it cannot read (unknown rpc,
// cut short, CREATE or VERIFY body that does not unpack) is logged and the
// connection closed without an answer, as stock does; every connection is
// bounded by a timeout.
//
// Socket facts (src/plugins/auth/slurm/sack.c, common/sack_api.c):
// slurmd binds /run/slurm/sack.socket (creating /run/slurm 0755 owned by
// SlurmUser on 24.11, SlurmdUser on 26.05; refusing a directory owned by
// another non-root user), removes a socket already there, binds with mode
// 0777 and never removes it. slurmctld uses /run/slurmctld, slurmdbd
// /run/slurmdbd. No slurm.conf setting moves them (AuthInfo=disable_sack
// turns them off; 26.05 sackd alone honours RUNTIME_DIRECTORY). Clients
// try /run/slurm, /run/slurmctld, /run/slurmdbd in turn; 26.05 first
// $SLURM_SACK_SOCKET (then only it) or /run/slurm-<ClusterName>.
package sack

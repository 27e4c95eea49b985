/*
 * oracle: print what the real Slurm 22.05 library makes of a slurm.conf, in
 * the line format read by slurmconf's golden tests. Written for TiEE; it only
 * calls libslurm (Debian libslurm-dev / libslurmfull), it copies no Slurm code.
 *
 *   gcc -o /tmp/oracle oracle.c -I/usr/include \
 *       -L/usr/lib/x86_64-linux-gnu/slurm-wlm -lslurmfull \
 *       -Wl,-rpath,/usr/lib/x86_64-linux-gnu/slurm-wlm
 *   /tmp/oracle file.conf > file.conf.oracle
 *
 * Run by gen.sh; a config Slurm rejects makes the library exit non-zero.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <slurm/slurm.h>

/* Layout of slurm_conf_node_t in 22.05 (src/common/read_config.h). */
typedef struct {
	char *nodenames, *hostnames, *addresses, *bcast_addresses;
	char *gres, *feature, *port_str;
	uint32_t cpu_bind;
	uint16_t cpus;
	char *cpu_spec_list;
	uint16_t boards, tot_sockets, cores, core_spec_cnt, threads;
	uint64_t real_memory, mem_spec_limit;
	char *reason, *state;
	uint32_t tmp_disk;
	char *tres_weights_str;
	uint32_t weight;
} conf_node_t;

extern slurm_conf_t slurm_conf;
extern int slurm_conf_init(const char *file_name);
extern int slurm_conf_nodename_array(conf_node_t **ptr_array[]);
extern uint16_t slurm_conf_get_port(const char *node_name);
extern char *slurm_conf_get_nodeaddr(const char *node_hostname);
extern char *slurm_conf_get_hostname(const char *node_name);
extern int slurm_conf_get_cpus_bsct(const char *node_name, uint16_t *cpus,
				    uint16_t *boards, uint16_t *sockets,
				    uint16_t *cores, uint16_t *threads);

static const char *s(const char *p) { return p ? p : "(null)"; }

int main(int argc, char **argv)
{
	conf_node_t **nodes;
	int i, n;

	if (argc != 2 || slurm_conf_init(argv[1]) != 0) {
		printf("error\n");
		return 1;
	}
	printf("hash %u\n", slurm_conf.hash_val);
	printf("cluster %s\n", s(slurm_conf.cluster_name));
	for (i = 0; i < (int) slurm_conf.control_cnt; i++)
		printf("ctld %s %s\n", s(slurm_conf.control_machine[i]),
		       s(slurm_conf.control_addr[i]));
	printf("ctldport %u %u\n", slurm_conf.slurmctld_port,
	       slurm_conf.slurmctld_port_count);
	printf("slurmdport %u\n", slurm_conf.slurmd_port);
	printf("timeouts msg=%u slurmd=%u killwait=%u batch=%u tcp=%u\n",
	       slurm_conf.msg_timeout, slurm_conf.slurmd_timeout,
	       slurm_conf.kill_wait, slurm_conf.batch_start_timeout,
	       slurm_conf.tcp_timeout);
	printf("treewidth %u\n", slurm_conf.tree_width);
	printf("spool %s\n", s(slurm_conf.slurmd_spooldir));
	printf("pidfile %s\n", s(slurm_conf.slurmd_pidfile));
	printf("tmpfs %s\n", s(slurm_conf.tmp_fs));
	printf("proctrack %s\n", s(slurm_conf.proctrack_type));
	printf("taskplugin %s\n", s(slurm_conf.task_plugin));
	printf("select %s\n", s(slurm_conf.select_type));
	printf("authtype %s\n", s(slurm_conf.authtype));
	printf("credtype %s\n", s(slurm_conf.cred_type));
	printf("mpidefault %s\n", s(slurm_conf.mpi_default));
	printf("prologflags %u\n", slurm_conf.prolog_flags);
	printf("slurmuser %s %u\n", s(slurm_conf.slurm_user_name),
	       slurm_conf.slurm_user_id);
	printf("rlimits %s\n", s(slurm_conf.propagate_rlimits));
	printf("ret2service %u\n", slurm_conf.ret2service);
	printf("maxtasks %u\n", slurm_conf.max_tasks_per_node);
	printf("slurmddebug %u\n", slurm_conf.slurmd_debug);
	printf("prolog %s\n", s(slurm_conf.prolog));
	printf("epilog %s\n", s(slurm_conf.epilog));

	/* Expand every NodeName line now, as slurmd does; bad lines are fatal. */
	(void) slurm_conf_get_port("");
	n = slurm_conf_nodename_array(&nodes);
	for (i = 0; i < n; i++) {
		conf_node_t *c = nodes[i];
		hostlist_t hl = slurm_hostlist_create(c->nodenames);
		char *alias;

		printf("line %s cpus=%u boards=%u sockets=%u cores=%u threads=%u mem=%lu tmp=%u weight=%u feature=%s gres=%s state=%s\n",
		       s(c->nodenames), c->cpus, c->boards, c->tot_sockets,
		       c->cores, c->threads, (unsigned long) c->real_memory,
		       c->tmp_disk, c->weight, s(c->feature), s(c->gres),
		       s(c->state));
		while (hl && (alias = slurm_hostlist_shift(hl))) {
			uint16_t cpus = 0, boards = 0, sockets = 0, cores = 0,
				threads = 0;
			char *host = slurm_conf_get_hostname(alias);
			/* looked up by host name, as slurmd does */
			char *addr = host ? slurm_conf_get_nodeaddr(host) : NULL;

			slurm_conf_get_cpus_bsct(alias, &cpus, &boards,
						 &sockets, &cores, &threads);
			printf("node %s addr=%s host=%s port=%u cpus=%u boards=%u sockets=%u cores=%u threads=%u\n",
			       alias, s(addr), s(host),
			       slurm_conf_get_port(alias), cpus, boards,
			       sockets, cores, threads);
			free(alias);
		}
		if (hl)
			slurm_hostlist_destroy(hl);
	}
	return 0;
}

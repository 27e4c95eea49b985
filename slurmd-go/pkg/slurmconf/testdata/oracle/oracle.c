/*
 * oracle: print what a real Slurm library (22.05, 24.11 or 26.05) makes of a
 * slurm.conf, or of the cgroup.conf beside it, in the line format read by
 * slurmconf's golden tests. Written for TiEE; it only calls libslurm (Debian
 * libslurm-dev / libslurmfull), it copies no Slurm code.
 *
 *   cc -o /tmp/oracle oracle.c -L/usr/lib/x86_64-linux-gnu/slurm-wlm \
 *       -lslurmfull -Wl,-rpath,/usr/lib/x86_64-linux-gnu/slurm-wlm
 *   /tmp/oracle file.conf > file.conf.oracle       slurm.conf values, nodes
 *   /tmp/oracle -c slurm.conf > x.oracle           cgroup.conf next to it
 *
 * Built inside each release's chroot against that release's headers
 * (gen.sh, oracle_integration_test.go); a configuration the library rejects
 * makes it exit non-zero.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurm.h>
#include <slurm/slurm_version.h>

#define AT_LEAST(a, b) (SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(a, b, 0))

/* Layout of slurm_conf_node_t (src/common/read_config.h of each release). */
typedef struct {
	char *nodenames, *hostnames, *addresses, *bcast_addresses;
	char *gres;
#if AT_LEAST(26, 5)
	char *gres_conf;
#endif
	char *feature, *port_str;
	uint32_t cpu_bind;
	uint16_t cpus;
	char *cpu_spec_list;
	uint16_t boards, tot_sockets, cores, core_spec_cnt, threads;
	uint64_t real_memory, mem_spec_limit;
#if AT_LEAST(26, 5)
	char *parameters;
#endif
	char *reason;
#if AT_LEAST(24, 11)
	uint16_t res_cores_per_gpu;
#endif
	char *state;
#if AT_LEAST(26, 5)
	uint32_t suspend_time;
#endif
	uint32_t tmp_disk;
#if AT_LEAST(26, 5)
	char *topology_str;
#endif
	char *tres_weights_str;
	uint32_t weight;
} conf_node_t;

/* config_key_pair_t (read_config.h), the same in every release. */
typedef struct {
	char *name, *value;
} key_pair_t;

extern slurm_conf_t slurm_conf;
extern int slurm_conf_init(const char *file_name);
extern int slurm_conf_nodename_array(conf_node_t **ptr_array[]);
extern char *slurm_conf_get_nodeaddr(const char *node_hostname);
extern char *slurm_conf_get_hostname(const char *node_name);
extern int cgroup_conf_init(void);
extern void *cgroup_get_conf_list(void);
#if AT_LEAST(24, 11)
extern int slurm_conf_get_addr(const char *node_name, slurm_addr_t *address,
			       uint16_t flags);
#else
extern uint16_t slurm_conf_get_port(const char *node_name);
extern int slurm_conf_get_cpus_bsct(const char *node_name, uint16_t *cpus,
				    uint16_t *boards, uint16_t *sockets,
				    uint16_t *cores, uint16_t *threads);
#endif

#if AT_LEAST(24, 11)
/*
 * From 24.11 the library hands out a node's port only inside a resolved
 * address. Test node addresses are mostly names that resolve nowhere, so
 * every name resolves here to 192.0.2.1 (TEST-NET-1); the port is the
 * library's.
 */
int getaddrinfo(const char *node, const char *service,
		const struct addrinfo *hints, struct addrinfo **res)
{
	static int (*real)(const char *, const char *,
			   const struct addrinfo *, struct addrinfo **);
	struct addrinfo h;

	if (!real)
		real = dlsym(RTLD_NEXT, "getaddrinfo");
	if (!node)
		return real(node, service, hints, res);
	memset(&h, 0, sizeof(h));
	if (hints)
		h = *hints;
	h.ai_flags |= AI_NUMERICHOST;
	h.ai_flags &= ~AI_CANONNAME;
	if (!real(node, service, &h, res))
		return 0;
	return real("192.0.2.1", service, &h, res);
}

static uint16_t port_of(const char *alias)
{
	slurm_addr_t addr;

	memset(&addr, 0, sizeof(addr));
	if (slurm_conf_get_addr(alias, &addr, 0))
		return 0;
	if (addr.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *) &addr)->sin6_port);
	return ntohs(((struct sockaddr_in *) &addr)->sin_port);
}
#else
static uint16_t port_of(const char *alias)
{
	return slurm_conf_get_port(alias);
}
#endif

static const char *s(const char *p) { return p ? p : "(null)"; }

static void print_scripts(const char *what, char **list, uint32_t cnt)
{
	uint32_t i;

	if (!cnt)
		printf("%s (null)\n", what);
	for (i = 0; i < cnt; i++)
		printf("%s %s\n", what, s(list[i]));
}

static int print_cgroup(const char *file)
{
	void *l, *it;
	key_pair_t *kp;

	if (slurm_conf_init(file) != 0)
		return 1;
	cgroup_conf_init();
	l = cgroup_get_conf_list();
	it = slurm_list_iterator_create(l);
	while ((kp = slurm_list_next(it)))
		printf("cgroup %s=%s\n", s(kp->name), s(kp->value));
	slurm_list_iterator_destroy(it);
	return 0;
}

int main(int argc, char **argv)
{
	conf_node_t **nodes;
	int i, n;

	if (argc == 3 && !strcmp(argv[1], "-c")) {
		/* cgroup.conf is found next to $SLURM_CONF, as in slurmd */
		setenv("SLURM_CONF", argv[2], 1);
		if (print_cgroup(argv[2])) {
			printf("error\n");
			return 1;
		}
		return 0;
	}
	if (argc != 2) {
		printf("error\n");
		return 1;
	}
	/* slurmd exports the -f file: 24.11+ resolve Include against it */
	setenv("SLURM_CONF", argv[1], 1);
	if (slurm_conf_init(argv[1]) != 0) {
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
#if AT_LEAST(24, 11)
	print_scripts("prolog", slurm_conf.prolog, slurm_conf.prolog_cnt);
	print_scripts("epilog", slurm_conf.epilog, slurm_conf.epilog_cnt);
#else
	print_scripts("prolog", &slurm_conf.prolog, slurm_conf.prolog ? 1 : 0);
	print_scripts("epilog", &slurm_conf.epilog, slurm_conf.epilog ? 1 : 0);
#endif
	printf("unkillable %u\n", slurm_conf.unkillable_timeout);
	printf("jobacct %s\n", s(slurm_conf.job_acct_gather_type));
	printf("switch %s\n", s(slurm_conf.switch_type));
#if AT_LEAST(26, 5)
	printf("namespace %s\n", s(slurm_conf.namespace_plugin));
	printf("scripttimeouts prolog=%u epilog=%u\n",
	       slurm_conf.prolog_timeout, slurm_conf.epilog_timeout);
#else
	printf("container %s\n", s(slurm_conf.job_container_plugin));
	printf("scripttimeouts prolog=%u epilog=%u\n",
	       slurm_conf.prolog_epilog_timeout,
	       slurm_conf.prolog_epilog_timeout);
#endif
#if AT_LEAST(24, 11)
	printf("hash %s tls %s\n", s(slurm_conf.hash_plugin),
	       s(slurm_conf.tls_type));
#endif

	/* Expand every NodeName line now, as slurmd does; bad lines are fatal. */
	(void) port_of("");
	n = slurm_conf_nodename_array(&nodes);
	for (i = 0; i < n; i++) {
		conf_node_t *c = nodes[i];
		/* hostlist_t is a pointer in 22.05, a struct from 24.11 */
		void *hl = slurm_hostlist_create(c->nodenames);
		char *alias;

		printf("line %s cpus=%u boards=%u sockets=%u cores=%u threads=%u mem=%lu tmp=%u weight=%u feature=%s gres=%s state=%s\n",
		       s(c->nodenames), c->cpus, c->boards, c->tot_sockets,
		       c->cores, c->threads, (unsigned long) c->real_memory,
		       c->tmp_disk, c->weight, s(c->feature), s(c->gres),
		       s(c->state));
		while (hl && (alias = slurm_hostlist_shift(hl))) {
			uint16_t cpus = c->cpus, boards = c->boards,
				 sockets = c->tot_sockets, cores = c->cores,
				 threads = c->threads;
			char *host = slurm_conf_get_hostname(alias);
			/* looked up by host name, as slurmd does */
			char *addr = host ? slurm_conf_get_nodeaddr(host) : NULL;

#if !AT_LEAST(24, 11)
			slurm_conf_get_cpus_bsct(alias, &cpus, &boards,
						 &sockets, &cores, &threads);
#endif
			printf("node %s addr=%s host=%s port=%u cpus=%u boards=%u sockets=%u cores=%u threads=%u\n",
			       alias, s(addr), s(host), port_of(alias), cpus,
			       boards, sockets, cores, threads);
			free(alias);
		}
		if (hl)
			slurm_hostlist_destroy(hl);
	}
	return 0;
}

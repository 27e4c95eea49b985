/*
 * slurmd-go-pmix: the OpenPMIx server of one step on one node, started by
 * slurmstepd-go (slurmd-go/internal/pmix) and kept out of the Go daemon so
 * that no cgo reaches it. It runs as the step's user, hosts the PMIx server
 * library for the step's local tasks and hands every inter-node exchange
 * (fence contributions, direct modex) to the step manager over fd 3, a
 * socketpair speaking the framed protocol of README.md. Logs go to stderr.
 *
 * What it registers follows Slurm's mpi/pmix (pmixp_client.c, read for
 * facts): the same job-level keys, the same per-rank PMIX_PROC_DATA.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <pmix.h>
#include <pmix_server.h>

#define CHAN_FD 3
/* A frame larger than this is a protocol error, not a job (the Go side has the same bound). */
#define MAX_FRAME (1u << 30)

/* Go -> helper */
#define M_JOB 'J'
#define M_FENCE_RESULT 'F'
#define M_DMDX_SERVE 'D'
#define M_DMDX_REPLY 'R'
#define M_QUIT 'Q'
/* helper -> Go */
#define M_ENV 'E'
#define M_READY 'O'
#define M_FENCE 'f'
#define M_DMDX_REQ 'm'
#define M_DMDX_ANSWER 'd'
#define M_ABORT 'a'
#define M_ERROR 'x'

static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER;

static void logf_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "slurmd-go-pmix: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* send_frame writes one frame: u32 length (type + payload), type, the parts. */
static int send_frame(char type, const void *a, size_t na, const void *b, size_t nb)
{
	uint32_t len = htonl((uint32_t)(1 + na + nb));
	int rc = 0;
	pthread_mutex_lock(&write_mu);
	if (write_all(CHAN_FD, &len, 4) || write_all(CHAN_FD, &type, 1) ||
	    (na && write_all(CHAN_FD, a, na)) || (nb && write_all(CHAN_FD, b, nb)))
		rc = -1;
	pthread_mutex_unlock(&write_mu);
	if (rc)
		logf_("write to the step manager failed: %s", strerror(errno));
	return rc;
}

static void fatal(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	logf_("%s", msg);
	send_frame(M_ERROR, msg, strlen(msg), NULL, 0);
	exit(1);
}

static void put32(unsigned char *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}

/* ---- the job, as the step manager described it ---- */

static struct {
	char nspace[PMIX_MAX_NSLEN + 1];
	char *jobid;            /* "job.step" */
	uid_t uid;
	gid_t gid;
	uint32_t nodeid;
	uint32_t nnodes;
	uint32_t ntasks;
	char **hosts;           /* node names, step order */
	uint32_t *task_node;    /* rank -> node index */
	uint32_t *node_cnt;     /* node index -> task count */
	uint32_t **node_ranks;  /* node index -> its ranks, ascending local id order */
	char *node_ranks_spec;  /* "0,1;2,3" as PMIx_generate_ppn takes it */
	char *lib_tmpdir, *cli_tmpdir, *cli_tmpdir_base, *anl_map;
} job;

static char *kv(char **keys, const char *key)
{
	size_t n = strlen(key);
	for (char **k = keys; *k; k++)
		if (!strncmp(*k, key, n) && (*k)[n] == '=')
			return *k + n + 1;
	return NULL;
}

static char *need(char **keys, const char *key)
{
	char *v = kv(keys, key);
	if (!v)
		fatal("job description lacks %s", key);
	return v;
}

static uint32_t need_u32(char **keys, const char *key)
{
	char *v = need(keys, key), *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno || *end || end == v || x > UINT32_MAX)
		fatal("job description: %s=%s is not a number", key, v);
	return (uint32_t)x;
}

/* split returns the n fields of s separated by sep (s is modified). */
static char **split(char *s, char sep, uint32_t *n)
{
	uint32_t cnt = 1;
	for (char *p = s; *p; p++)
		cnt += (*p == sep);
	char **out = calloc(cnt + 1, sizeof(*out));
	if (!out)
		fatal("out of memory");
	uint32_t i = 0;
	out[i++] = s;
	for (char *p = s; *p; p++)
		if (*p == sep) {
			*p = 0;
			out[i++] = p + 1;
		}
	*n = cnt;
	return out;
}

static void parse_job(char *payload, size_t n)
{
	/* NUL-terminated key=value strings */
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++)
		cnt += (payload[i] == 0);
	if (n == 0 || payload[n - 1] != 0)
		fatal("job description is not NUL-terminated");
	char **keys = calloc(cnt + 1, sizeof(*keys));
	if (!keys)
		fatal("out of memory");
	size_t k = 0;
	for (char *p = payload; p < payload + n; p += strlen(p) + 1)
		keys[k++] = p;

	char *ns = need(keys, "nspace");
	if (strlen(ns) > PMIX_MAX_NSLEN)
		fatal("nspace %s is too long", ns);
	strcpy(job.nspace, ns);
	job.jobid = need(keys, "jobid");
	job.uid = need_u32(keys, "uid");
	job.gid = need_u32(keys, "gid");
	job.nodeid = need_u32(keys, "nodeid");
	job.ntasks = need_u32(keys, "ntasks");
	job.lib_tmpdir = need(keys, "lib_tmpdir");
	job.cli_tmpdir = need(keys, "cli_tmpdir");
	job.cli_tmpdir_base = need(keys, "cli_tmpdir_base");
	job.anl_map = need(keys, "anl_map");
	job.hosts = split(strdup(need(keys, "hosts")), ',', &job.nnodes);
	if (job.nodeid >= job.nnodes)
		fatal("nodeid %u is not below the %u nodes", job.nodeid, job.nnodes);

	/* ranks per node, "0,1;2,3": node i hosts the ranks of field i */
	char *spec = need(keys, "node_ranks");
	job.node_ranks_spec = strdup(spec);
	uint32_t nf;
	char **fields = split(strdup(spec), ';', &nf);
	if (nf != job.nnodes)
		fatal("node_ranks has %u fields for %u nodes", nf, job.nnodes);
	job.task_node = calloc(job.ntasks, sizeof(uint32_t));
	job.node_cnt = calloc(job.nnodes, sizeof(uint32_t));
	job.node_ranks = calloc(job.nnodes, sizeof(uint32_t *));
	if (!job.task_node || !job.node_cnt || !job.node_ranks)
		fatal("out of memory");
	for (uint32_t i = 0; i < job.ntasks; i++)
		job.task_node[i] = UINT32_MAX;
	uint32_t seen = 0;
	for (uint32_t i = 0; i < nf; i++) {
		if (!fields[i][0])
			continue;
		uint32_t nr;
		char **ranks = split(fields[i], ',', &nr);
		job.node_ranks[i] = calloc(nr, sizeof(uint32_t));
		for (uint32_t j = 0; j < nr; j++) {
			char *end;
			unsigned long r = strtoul(ranks[j], &end, 10);
			if (*end || end == ranks[j] || r >= job.ntasks || job.task_node[r] != UINT32_MAX)
				fatal("node_ranks: bad or repeated rank '%s'", ranks[j]);
			job.task_node[r] = i;
			job.node_ranks[i][j] = (uint32_t)r;
		}
		job.node_cnt[i] = nr;
		seen += nr;
		free(ranks);
	}
	if (seen != job.ntasks)
		fatal("node_ranks names %u ranks for ntasks=%u", seen, job.ntasks);
	if (job.node_cnt[job.nodeid] == 0)
		fatal("no local ranks on node %u", job.nodeid);
	free(fields);
	free(keys);
}

/* ---- callbacks the library calls on its progress thread ---- */

typedef struct pending {
	uint32_t id;
	pmix_modex_cbfunc_t cb;
	void *cbdata;
	struct pending *next;
} pending_t;

static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;
static pending_t *fences, *dmdxs;
static uint32_t next_fence, next_dmdx;

static uint32_t add_pending(pending_t **list, uint32_t *next, pmix_modex_cbfunc_t cb, void *cbdata)
{
	pending_t *p = calloc(1, sizeof(*p));
	if (!p)
		fatal("out of memory");
	pthread_mutex_lock(&pend_mu);
	p->id = (*next)++;
	p->cb = cb;
	p->cbdata = cbdata;
	p->next = *list;
	*list = p;
	pthread_mutex_unlock(&pend_mu);
	return p->id;
}

static pending_t *take_pending(pending_t **list, uint32_t id)
{
	pthread_mutex_lock(&pend_mu);
	for (pending_t **pp = list; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id) {
			pending_t *p = *pp;
			*pp = p->next;
			pthread_mutex_unlock(&pend_mu);
			return p;
		}
	pthread_mutex_unlock(&pend_mu);
	return NULL;
}

static pmix_status_t fence_nb(const pmix_proc_t procs[], size_t nprocs,
			      const pmix_info_t info[], size_t ninfo,
			      char *data, size_t ndata,
			      pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	unsigned char collect = 0;
	for (size_t i = 0; i < ninfo; i++)
		if (!strncmp(info[i].key, PMIX_COLLECT_DATA, PMIX_MAX_KEYLEN))
			collect = 1;
	for (size_t i = 0; i < nprocs; i++)
		if (strncmp(procs[i].nspace, job.nspace, PMIX_MAX_NSLEN)) {
			logf_("fence over namespace %s, not this step's %s", procs[i].nspace, job.nspace);
			return PMIX_ERR_NOT_SUPPORTED;
		}
	uint32_t id = add_pending(&fences, &next_fence, cbfunc, cbdata);
	/* u32 id | u8 collect | u32 nprocs | ranks | data */
	size_t nhdr = 9 + 4 * nprocs;
	unsigned char *hdr = malloc(nhdr);
	if (!hdr)
		fatal("out of memory");
	put32(hdr, id);
	hdr[4] = collect;
	put32(hdr + 5, (uint32_t)nprocs);
	for (size_t i = 0; i < nprocs; i++)
		put32(hdr + 9 + 4 * i, procs[i].rank);
	int rc = send_frame(M_FENCE, hdr, nhdr, data, ndata);
	free(hdr);
	if (rc) {
		free(take_pending(&fences, id));
		return PMIX_ERROR;
	}
	return PMIX_SUCCESS;
}

static pmix_status_t direct_modex(const pmix_proc_t *proc,
				  const pmix_info_t info[], size_t ninfo,
				  pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	(void)info;
	(void)ninfo;
	if (strncmp(proc->nspace, job.nspace, PMIX_MAX_NSLEN) || proc->rank >= job.ntasks)
		return PMIX_ERR_NOT_FOUND;
	uint32_t id = add_pending(&dmdxs, &next_dmdx, cbfunc, cbdata);
	unsigned char hdr[8];
	put32(hdr, id);
	put32(hdr + 4, proc->rank);
	if (send_frame(M_DMDX_REQ, hdr, 8, NULL, 0)) {
		free(take_pending(&dmdxs, id));
		return PMIX_ERROR;
	}
	return PMIX_SUCCESS;
}

static pmix_status_t abort_fn(const pmix_proc_t *proc, void *server_object,
			      int status, const char msg[],
			      pmix_proc_t procs[], size_t nprocs,
			      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)server_object;
	(void)procs;
	(void)nprocs;
	unsigned char hdr[8];
	put32(hdr, (uint32_t)status);
	put32(hdr + 4, proc ? proc->rank : PMIX_RANK_UNDEF);
	send_frame(M_ABORT, hdr, 8, msg ? msg : "", msg ? strlen(msg) : 0);
	if (cbfunc)
		cbfunc(PMIX_SUCCESS, cbdata);
	return PMIX_SUCCESS;
}

static pmix_server_module_t module = {
	.abort = abort_fn,
	.fence_nb = fence_nb,
	.direct_modex = direct_modex,
};

static void release_buf(void *cbdata)
{
	free(cbdata);
}

/* dmdx_served answers a remote node's request for one of our ranks' data. */
static void dmdx_served(pmix_status_t status, char *data, size_t sz, void *cbdata)
{
	unsigned char hdr[8];
	put32(hdr, (uint32_t)(uintptr_t)cbdata);
	put32(hdr + 4, (uint32_t)status);
	send_frame(M_DMDX_ANSWER, hdr, 8, data, status == PMIX_SUCCESS ? sz : 0);
}

/* ---- registration ---- */

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int left;
	pmix_status_t rc;
} waiter_t;

static void op_done(pmix_status_t status, void *cbdata)
{
	waiter_t *w = cbdata;
	pthread_mutex_lock(&w->mu);
	if (status != PMIX_SUCCESS)
		w->rc = status;
	w->left--;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void add(void *list, const char *key, const void *val, pmix_data_type_t t)
{
	pmix_status_t rc = PMIx_Info_list_add(list, key, val, t);
	if (rc != PMIX_SUCCESS)
		fatal("PMIx_Info_list_add %s: %s", key, PMIx_Error_string(rc));
}

static int32_t local_id(uint32_t rank)
{
	if (job.task_node[rank] != job.nodeid)
		return -1;
	for (uint32_t j = 0; j < job.node_cnt[job.nodeid]; j++)
		if (job.node_ranks[job.nodeid][j] == rank)
			return (int32_t)j;
	return -1;
}

static void register_job(void)
{
	void *list = PMIx_Info_list_start();
	bool no = false, yes = true;
	uint32_t nloc = job.node_cnt[job.nodeid];

	add(list, PMIX_SPAWNED, &no, PMIX_BOOL);
	add(list, PMIX_TMPDIR, job.cli_tmpdir_base, PMIX_STRING);
	add(list, PMIX_NSDIR, job.cli_tmpdir, PMIX_STRING);
	add(list, PMIX_TDIR_RMCLEAN, &yes, PMIX_BOOL);
	add(list, PMIX_JOBID, job.jobid, PMIX_STRING);
	add(list, PMIX_NODEID, &job.nodeid, PMIX_UINT32);
	for (uint32_t r = 0; r < job.ntasks; r++) {
		void *pl = PMIx_Info_list_start();
		pmix_rank_t rank = r;
		int zero = 0;
		add(pl, PMIX_RANK, &rank, PMIX_PROC_RANK);
		add(pl, PMIX_APPNUM, &zero, PMIX_INT);
		add(pl, PMIX_APPLDR, &zero, PMIX_INT);
		add(pl, PMIX_GLOBAL_RANK, &r, PMIX_UINT32);
		add(pl, PMIX_APP_RANK, &r, PMIX_UINT32);
		int32_t lid = local_id(r);
		if (lid >= 0) {
			uint16_t l = (uint16_t)lid;
			add(pl, PMIX_LOCAL_RANK, &l, PMIX_UINT16);
			add(pl, PMIX_NODE_RANK, &l, PMIX_UINT16);
		}
		add(pl, PMIX_HOSTNAME, job.hosts[job.task_node[r]], PMIX_STRING);
		/* pmixp_client.c gives every rank this node's id, not its own node's. */
		add(pl, PMIX_NODEID, &job.nodeid, PMIX_UINT32);
		pmix_data_array_t darr;
		pmix_status_t rc = PMIx_Info_list_convert(pl, &darr);
		if (rc != PMIX_SUCCESS)
			fatal("PMIx_Info_list_convert: %s", PMIx_Error_string(rc));
		add(list, PMIX_PROC_DATA, &darr, PMIX_DATA_ARRAY);
		PMIX_DATA_ARRAY_DESTRUCT(&darr);
		PMIx_Info_list_release(pl);
	}
	add(list, PMIX_UNIV_SIZE, &job.ntasks, PMIX_UINT32);
	add(list, PMIX_JOB_SIZE, &job.ntasks, PMIX_UINT32);
	add(list, PMIX_LOCAL_SIZE, &nloc, PMIX_UINT32);
	add(list, PMIX_NODE_SIZE, &nloc, PMIX_UINT32);
	add(list, PMIX_MAX_PROCS, &job.ntasks, PMIX_UINT32);

	/* node map: the node names, comma separated, in step order */
	size_t hl = 1;
	for (uint32_t i = 0; i < job.nnodes; i++)
		hl += strlen(job.hosts[i]) + 1;
	char *hostcsv = calloc(1, hl);
	for (uint32_t i = 0; i < job.nnodes; i++) {
		if (i)
			strcat(hostcsv, ",");
		strcat(hostcsv, job.hosts[i]);
	}
	char *regex = NULL, *ppn = NULL;
	pmix_status_t rc = PMIx_generate_regex(hostcsv, &regex);
	if (rc != PMIX_SUCCESS)
		fatal("PMIx_generate_regex(%s): %s", hostcsv, PMIx_Error_string(rc));
	/* the regex may be binary (a "blob:" prefix): it is passed as a string,
	 * as pmixp_client.c does, since the library reads it that way */
	add(list, PMIX_NODE_MAP, regex, PMIX_STRING);
	rc = PMIx_generate_ppn(job.node_ranks_spec, &ppn);
	if (rc != PMIX_SUCCESS)
		fatal("PMIx_generate_ppn(%s): %s", job.node_ranks_spec, PMIx_Error_string(rc));
	add(list, PMIX_PROC_MAP, ppn, PMIX_STRING);
	add(list, PMIX_ANL_MAP, job.anl_map, PMIX_STRING);

	/* local peers and the lowest local rank */
	char *peers = calloc(nloc, 12);
	uint32_t lldr = UINT32_MAX;
	for (uint32_t j = 0; j < nloc; j++) {
		uint32_t r = job.node_ranks[job.nodeid][j];
		sprintf(peers + strlen(peers), j ? ",%u" : "%u", r);
		if (r < lldr)
			lldr = r;
	}
	add(list, PMIX_LOCAL_PEERS, peers, PMIX_STRING);
	add(list, PMIX_LOCALLDR, &lldr, PMIX_UINT32);

	pmix_data_array_t info;
	rc = PMIx_Info_list_convert(list, &info);
	if (rc != PMIX_SUCCESS)
		fatal("PMIx_Info_list_convert: %s", PMIx_Error_string(rc));
	PMIx_Info_list_release(list);

	waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1 + (int)nloc, PMIX_SUCCESS};
	rc = PMIx_server_register_nspace(job.nspace, (int)nloc, info.array, info.size, op_done, &w);
	if (rc == PMIX_OPERATION_SUCCEEDED)
		op_done(PMIX_SUCCESS, &w);
	else if (rc != PMIX_SUCCESS)
		fatal("PMIx_server_register_nspace(%s): %s", job.nspace, PMIx_Error_string(rc));
	for (uint32_t j = 0; j < nloc; j++) {
		pmix_proc_t proc;
		PMIX_LOAD_PROCID(&proc, job.nspace, job.node_ranks[job.nodeid][j]);
		rc = PMIx_server_register_client(&proc, job.uid, job.gid, NULL, op_done, &w);
		if (rc == PMIX_OPERATION_SUCCEEDED)
			op_done(PMIX_SUCCESS, &w);
		else if (rc != PMIX_SUCCESS)
			fatal("PMIx_server_register_client(rank %u): %s", proc.rank, PMIx_Error_string(rc));
	}
	pthread_mutex_lock(&w.mu);
	while (w.left > 0)
		pthread_cond_wait(&w.cv, &w.mu);
	pthread_mutex_unlock(&w.mu);
	if (w.rc != PMIX_SUCCESS)
		fatal("registration of %s failed: %s", job.nspace, PMIx_Error_string(w.rc));
	PMIX_DATA_ARRAY_DESTRUCT(&info);
	free(hostcsv);
	free(regex);
	free(ppn);
	free(peers);

	/* each local task's environment, from PMIx_server_setup_fork */
	for (uint32_t j = 0; j < nloc; j++) {
		pmix_proc_t proc;
		char **env = NULL;
		PMIX_LOAD_PROCID(&proc, job.nspace, job.node_ranks[job.nodeid][j]);
		rc = PMIx_server_setup_fork(&proc, &env);
		if (rc != PMIX_SUCCESS)
			fatal("PMIx_server_setup_fork(rank %u): %s", proc.rank, PMIx_Error_string(rc));
		size_t n = 0;
		for (char **e = env; e && *e; e++)
			n += strlen(*e) + 1;
		char *buf = malloc(n + 4);
		put32((unsigned char *)buf, proc.rank);
		size_t off = 4;
		for (char **e = env; e && *e; e++) {
			size_t l = strlen(*e) + 1;
			memcpy(buf + off, *e, l);
			off += l;
			free(*e);
		}
		free(env);
		if (send_frame(M_ENV, buf, off, NULL, 0))
			exit(1);
		free(buf);
	}
}

/* ---- main loop: frames from the step manager ---- */

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	/* The step manager signals every process of the step (scancel -s, srun's
	 * forwarded signals), this one too; stock's server lives inside
	 * slurmstepd and sees none of them. Block them all, before the library
	 * starts its threads, which inherit the mask: only SIGKILL (the step's
	 * end) and SIGSTOP/SIGCONT (suspend) reach it. */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	bool inited = false;
	for (;;) {
		uint32_t len;
		if (read_all(CHAN_FD, &len, 4))
			break; /* the step manager is gone: finalize and leave */
		len = ntohl(len);
		if (len < 1 || len > MAX_FRAME)
			fatal("frame of %u bytes", len);
		unsigned char *f = malloc(len);
		if (!f)
			fatal("out of memory for a %u-byte frame", len);
		if (read_all(CHAN_FD, f, len))
			fatal("short frame");
		char type = (char)f[0];
		unsigned char *p = f + 1;
		size_t n = len - 1;
		if (!inited && type != M_JOB)
			fatal("first frame is '%c', not the job", type);
		switch (type) {
		case M_JOB: {
			if (inited)
				fatal("second job frame");
			parse_job((char *)p, n); /* job keeps pointers into f */
			void *l = PMIx_Info_list_start();
			uint32_t uid = job.uid;
			add(l, PMIX_USERID, &uid, PMIX_UINT32);
			add(l, PMIX_SERVER_TMPDIR, job.lib_tmpdir, PMIX_STRING);
			pmix_data_array_t info;
			PMIx_Info_list_convert(l, &info);
			PMIx_Info_list_release(l);
			pmix_status_t rc = PMIx_server_init(&module, info.array, info.size);
			PMIX_DATA_ARRAY_DESTRUCT(&info);
			if (rc != PMIX_SUCCESS)
				fatal("PMIx_server_init: %s", PMIx_Error_string(rc));
			inited = true;
			register_job();
			send_frame(M_READY, NULL, 0, NULL, 0);
			continue; /* f stays: job points into it */
		}
		case M_FENCE_RESULT:
		case M_DMDX_REPLY: {
			if (n < 8)
				fatal("short '%c' frame", type);
			pending_t *pd = take_pending(type == M_FENCE_RESULT ? &fences : &dmdxs, get32(p));
			if (!pd) {
				logf_("'%c' for unknown id %u", type, get32(p));
				break;
			}
			pmix_status_t st = (pmix_status_t)get32(p + 4);
			size_t nd = n - 8;
			char *data = NULL;
			if (nd) {
				data = malloc(nd);
				memcpy(data, p + 8, nd);
			}
			pd->cb(st, data, nd, pd->cbdata, release_buf, data);
			free(pd);
			break;
		}
		case M_DMDX_SERVE: {
			if (n < 8)
				fatal("short 'D' frame");
			pmix_proc_t proc;
			PMIX_LOAD_PROCID(&proc, job.nspace, get32(p + 4));
			uint32_t id = get32(p);
			pmix_status_t rc = PMIx_server_dmodex_request(&proc, dmdx_served, (void *)(uintptr_t)id);
			if (rc != PMIX_SUCCESS)
				dmdx_served(rc, NULL, 0, (void *)(uintptr_t)id);
			break;
		}
		case M_QUIT:
			free(f);
			goto out;
		default:
			fatal("unknown frame type 0x%02x", (unsigned)(unsigned char)type);
		}
		free(f);
	}
out:
	if (inited)
		PMIx_server_finalize();
	return 0;
}

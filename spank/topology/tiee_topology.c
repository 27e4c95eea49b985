/*
 * tiee_topology: keep a job inside one network zone.
 *
 * Loaded by srun/sbatch/salloc (local and allocator context) and by the
 * step manager (remote context: stock slurmstepd or TiEE's spank-runner).
 *
 *   --topology=zone|block|switch
 *     allocator/local, init_post_opt: the value goes to the job's
 *     spank_job_env as TIEE_TOPOLOGY, which job_submit.lua turns into a
 *     one-leaf-switch request (req_switch=1).
 *     remote, user_init: the step's nodes are checked (see below).
 *
 * Remote context, user_init (euid = the job user), when --topology was
 * given or the plugin argument probe=all is set and the step spans more
 * than one node: ask the node daemon's topology API (slurmd-go's
 * internal/topoapi, protocol v1 on a unix socket) for the step's nodes,
 * TCP-connect from this node to every other node's slurmd in parallel,
 * and fail the step (return -1; fatal when the plugin is "required") if
 * one cannot be reached, or if --topology=zone|block and the nodes span
 * several zones (blocks). Then export TIEE_TOPOLOGY_ZONE, _ZONES, _BLOCK
 * and _NODES_BY_ZONE into the tasks' environment.
 *
 * Plugin arguments (plugstack.conf):
 *   socket=<path>       the API socket; %n is this node's name
 *                       (default /var/spool/slurmd/tiee-topology.sock)
 *   probe=all           check every multi-node step, option or not
 *   probe_timeout=<s>   seconds for the connects (default 3)
 *
 * Only libc and <slurm/spank.h>: the plugin is built against each release's
 * header, and the hostlist expander below is its own (libslurm's is not
 * part of the SPANK API).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(tiee_topology, 1);

#define TT "tiee-topology"
#define DEFAULT_SOCKET "/var/spool/slurmd/tiee-topology.sock"
#define DEFAULT_PROBE_TIMEOUT 3
/* API_TIMEOUT bounds each read and write on the API socket (seconds). */
#define API_TIMEOUT 5
/* MAX_NODES bounds an expanded node list, as the API does. */
#define MAX_NODES 65536
/* PROBE_BATCH bounds the sockets open at once, under the fd limit. */
#define PROBE_BATCH 256
/* MAX_REPORTED bounds the unreachable nodes named one by one. */
#define MAX_REPORTED 10

static char opt_mode[16];	/* "", "zone", "block" or "switch" */
static char arg_socket[4096] = DEFAULT_SOCKET;
static int arg_probe_all;
static int arg_probe_timeout = DEFAULT_PROBE_TIMEOUT;

static int opt_cb(int val, const char *optarg, int remote);

struct spank_option spank_options[] = {
	{ "topology", "zone|block|switch",
	  "keep the job's nodes in one network zone (zone: one leaf switch, "
	  "waiting for it; block: one block; switch: one leaf switch if "
	  "available soon); steps check that their nodes reach each other",
	  1, 0, opt_cb },
	SPANK_OPTIONS_TABLE_END
};

/* tt_valid_mode: whether s is a --topology value. */
int tt_valid_mode(const char *s)
{
	return s && (!strcmp(s, "zone") || !strcmp(s, "block") ||
		     !strcmp(s, "switch"));
}

static int opt_cb(int val, const char *optarg, int remote)
{
	(void) val;
	(void) remote;
	if (!tt_valid_mode(optarg)) {
		slurm_error("%s: --topology=%s: want zone, block or switch", TT,
			    optarg ? optarg : "");
		return -1;
	}
	snprintf(opt_mode, sizeof(opt_mode), "%s", optarg);
	return 0;
}

/* ---- hostlist expansion: "n[1-3,05],x7" ---------------------------- */

struct strv {
	char **v;
	int n, cap;
};

static int strv_push(struct strv *s, const char *str, size_t len)
{
	if (s->n >= MAX_NODES)
		return -1;
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 16;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	if (!(s->v[s->n] = strndup(str, len)))
		return -1;
	s->n++;
	return 0;
}

static void strv_free(struct strv *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

/*
 * expand_token appends prefix + every name of tok ("a[1-2]b[3,5]c").
 * Ranges keep the width of their lower bound ("[08-10]": 08 09 10).
 */
static int expand_token(struct strv *out, const char *prefix, const char *tok)
{
	const char *lb = strchr(tok, '[');
	char buf[512];

	if (!lb) {
		int n = snprintf(buf, sizeof(buf), "%s%s", prefix, tok);
		if (n < 0 || (size_t) n >= sizeof(buf) || n == 0)
			return -1;
		return strv_push(out, buf, n);
	}
	const char *rb = strchr(lb, ']');
	if (!rb || rb == lb + 1)
		return -1;
	char head[512];
	int hn = snprintf(head, sizeof(head), "%s%.*s", prefix,
			  (int) (lb - tok), tok);
	if (hn < 0 || (size_t) hn >= sizeof(head))
		return -1;
	/* each comma-separated piece of the brackets */
	for (const char *p = lb + 1; p < rb;) {
		const char *end = memchr(p, ',', rb - p);
		if (!end)
			end = rb;
		const char *dash = memchr(p, '-', end - p);
		const char *hi_s = dash ? dash + 1 : p;
		const char *lo_e = dash ? dash : end;
		if (lo_e == p || hi_s == end)
			return -1;
		for (const char *q = p; q < end; q++)
			if (q != dash && !isdigit((unsigned char) *q))
				return -1;
		int width = (int) (lo_e - p);
		unsigned long lo = strtoul(p, NULL, 10);
		unsigned long hi = strtoul(hi_s, NULL, 10);
		if (hi < lo || hi - lo >= MAX_NODES)
			return -1;
		for (unsigned long i = lo; i <= hi; i++) {
			char next[512];
			int n = snprintf(next, sizeof(next), "%s%0*lu", head,
					 width, i);
			if (n < 0 || (size_t) n >= sizeof(next))
				return -1;
			if (expand_token(out, next, rb + 1) < 0)
				return -1;
		}
		p = end + 1;
	}
	return 0;
}

/*
 * tt_expand_hostlist expands expr into *out (names in order, duplicates
 * kept); -1 on a malformed list or more than MAX_NODES names.
 */
int tt_expand_hostlist(const char *expr, char ***out, int *n)
{
	struct strv v = { 0 };
	char tok[1024];
	int depth = 0;
	size_t tl = 0;

	*out = NULL;
	*n = 0;
	for (const char *p = expr;; p++) {
		char c = *p;
		if (c == '[')
			depth++;
		else if (c == ']')
			depth--;
		if (depth < 0 || depth > 1)
			goto bad;
		if (c == '\0' || (depth == 0 && (c == ',' || isspace((unsigned char) c)))) {
			if (depth != 0)
				goto bad;
			if (tl > 0) {
				tok[tl] = '\0';
				if (expand_token(&v, "", tok) < 0)
					goto bad;
			}
			tl = 0;
			if (c == '\0')
				break;
			continue;
		}
		if (tl + 1 >= sizeof(tok))
			goto bad;
		tok[tl++] = c;
	}
	*out = v.v;
	*n = v.n;
	return 0;
bad:
	strv_free(&v);
	return -1;
}

void tt_free_strv(char **v, int n)
{
	struct strv s = { v, n, n };
	strv_free(&s);
}

/* tt_natcmp orders names with their digit runs as numbers (n2 < n10). */
int tt_natcmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char) *a) && isdigit((unsigned char) *b)) {
			const char *ea = a, *eb = b;
			while (*a == '0' && isdigit((unsigned char) a[1]))
				a++;
			while (*b == '0' && isdigit((unsigned char) b[1]))
				b++;
			for (ea = a; isdigit((unsigned char) *ea); ea++)
				;
			for (eb = b; isdigit((unsigned char) *eb); eb++)
				;
			if (ea - a != eb - b)
				return (ea - a) < (eb - b) ? -1 : 1;
			int c = strncmp(a, b, ea - a);
			if (c)
				return c;
			a = ea;
			b = eb;
			continue;
		}
		if (*a != *b)
			return (unsigned char) *a < (unsigned char) *b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : (*b ? -1 : 0);
}

/* ---- the topology API client --------------------------------------- */

struct tt_node {
	char name[256];
	char addr[256];		/* "-" when unknown */
	char port[8];		/* "-" when unknown */
	char zone[256];
	char block[256];
	int fd;			/* probe socket */
	int err;		/* probe result: 0 or an errno */
	int done;
};

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		len -= w;
	}
	return 0;
}

/* parse_node_line reads "node N addr A port P zone Z block B". */
static int parse_node_line(const char *line, struct tt_node *n)
{
	char name[256], addr[256], port[8], zone[256], block[256];
	if (sscanf(line, "node %255s addr %255s port %7s zone %255s block %255s",
		   name, addr, port, zone, block) != 5)
		return -1;
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	snprintf(n->addr, sizeof(n->addr), "%s", addr);
	snprintf(n->port, sizeof(n->port), "%s", port);
	snprintf(n->zone, sizeof(n->zone), "%s", zone);
	snprintf(n->block, sizeof(n->block), "%s", block);
	n->fd = -1;
	return 0;
}

/*
 * tt_query asks the API at path about names; on success *nodes holds one
 * entry per answered node. On failure errbuf says why (the daemon's error
 * line, or the socket error).
 */
int tt_query(const char *path, char **names, int nnames,
	     struct tt_node **nodes, int *nn, char *errbuf, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = API_TIMEOUT };
	char *req = NULL, *resp = NULL;
	size_t reqlen = 0, rlen = 0, rcap = 0;
	int fd = -1, rc = -1;
	FILE *ms;

	*nodes = NULL;
	*nn = 0;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(errbuf, errlen, "socket path %s too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		snprintf(errbuf, errlen, "cannot connect to the topology API at %s: %s",
			 path, strerror(errno));
		goto out;
	}
	if (!(ms = open_memstream(&req, &reqlen)))
		goto oom;
	fprintf(ms, "TIEE-TOPOLOGY 1 NODES ");
	for (int i = 0; i < nnames; i++)
		fprintf(ms, "%s%s", i ? "," : "", names[i]);
	fputc('\n', ms);
	fclose(ms);
	if (write_all(fd, req, reqlen) < 0) {
		snprintf(errbuf, errlen, "topology API at %s: sending: %s", path,
			 strerror(errno));
		goto out;
	}
	for (;;) {
		if (rcap - rlen < 4096) {
			if (rcap > (size_t) MAX_NODES * 1024) {
				snprintf(errbuf, errlen, "topology API at %s: reply too long", path);
				goto out;
			}
			char *r = realloc(resp, rcap = rcap * 2 + 8192);
			if (!r)
				goto oom;
			resp = r;
		}
		ssize_t got = read(fd, resp + rlen, rcap - rlen - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(errbuf, errlen, "topology API at %s: reading: %s", path,
				 errno == EAGAIN ? "timed out" : strerror(errno));
			goto out;
		}
		if (got == 0)
			break;
		rlen += got;
		resp[rlen] = '\0';
		if (rlen >= 4 && (!strcmp(resp + rlen - 4, "end\n")) &&
		    (rlen == 4 || resp[rlen - 5] == '\n'))
			break;
		if (!strncmp(resp, "error ", 6) && memchr(resp, '\n', rlen))
			break;
	}
	if (!resp) {
		snprintf(errbuf, errlen, "topology API at %s: empty reply", path);
		goto out;
	}
	resp[rlen] = '\0';
	if (!strncmp(resp, "error ", 6)) {
		resp[strcspn(resp, "\n")] = '\0';
		snprintf(errbuf, errlen, "topology API at %s: %s", path, resp + 6);
		goto out;
	}
	*nodes = calloc(nnames ? nnames : 1, sizeof(**nodes));
	if (!*nodes)
		goto oom;
	int ended = 0;
	for (char *save = NULL, *l = strtok_r(resp, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(l, "end")) {
			ended = 1;
			break;
		}
		if (*nn >= nnames || parse_node_line(l, &(*nodes)[*nn]) < 0) {
			snprintf(errbuf, errlen, "topology API at %s: unexpected reply line \"%.100s\"",
				 path, l);
			goto out;
		}
		(*nn)++;
	}
	if (!ended) {
		snprintf(errbuf, errlen, "topology API at %s: reply ended early", path);
		goto out;
	}
	rc = 0;
	goto out;
oom:
	snprintf(errbuf, errlen, "out of memory");
out:
	if (rc < 0) {
		free(*nodes);
		*nodes = NULL;
		*nn = 0;
	}
	if (fd >= 0)
		close(fd);
	free(req);
	free(resp);
	return rc;
}

/* ---- reachability probe -------------------------------------------- */

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* start_connect begins a non-blocking connect to n; done when it failed
 * or completed at once. */
static void start_connect(struct tt_node *n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	int e;

	n->fd = -1;
	if ((e = getaddrinfo(n->addr, n->port, &hints, &ai)) != 0) {
		n->err = e == EAI_SYSTEM ? errno : EHOSTUNREACH;
		n->done = 1;
		if (ai)
			freeaddrinfo(ai);
		return;
	}
	n->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       ai->ai_protocol);
	if (n->fd < 0) {
		n->err = errno;
		n->done = 1;
	} else if (connect(n->fd, ai->ai_addr, ai->ai_addrlen) == 0) {
		n->done = 1;
	} else if (errno != EINPROGRESS) {
		n->err = errno;
		n->done = 1;
	}
	freeaddrinfo(ai);
}

/*
 * tt_probe connects to every node of v[0..n) not yet done, PROBE_BATCH at
 * a time, each batch within timeout_s; err is ETIMEDOUT for those that did
 * not answer in time.
 */
void tt_probe(struct tt_node *v, int n, int timeout_s)
{
	struct pollfd pf[PROBE_BATCH];
	int idx[PROBE_BATCH];

	for (int base = 0; base < n; base += PROBE_BATCH) {
		int end = base + PROBE_BATCH < n ? base + PROBE_BATCH : n;
		long deadline = now_ms() + timeout_s * 1000L;
		for (int i = base; i < end; i++)
			if (!v[i].done)
				start_connect(&v[i]);
		for (;;) {
			int np = 0;
			for (int i = base; i < end; i++) {
				if (v[i].done)
					continue;
				pf[np].fd = v[i].fd;
				pf[np].events = POLLOUT;
				pf[np].revents = 0;
				idx[np++] = i;
			}
			long left = deadline - now_ms();
			if (np == 0)
				break;
			if (left <= 0) {
				for (int k = 0; k < np; k++) {
					v[idx[k]].err = ETIMEDOUT;
					v[idx[k]].done = 1;
				}
				break;
			}
			int r = poll(pf, np, (int) left);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				for (int k = 0; k < np; k++) {
					v[idx[k]].err = errno;
					v[idx[k]].done = 1;
				}
				break;
			}
			for (int k = 0; k < np; k++) {
				if (!pf[k].revents)
					continue;
				int so = 0;
				socklen_t sl = sizeof(so);
				if (getsockopt(pf[k].fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0)
					so = errno;
				v[idx[k]].err = so;
				v[idx[k]].done = 1;
			}
		}
		for (int i = base; i < end; i++) {
			if (v[i].fd >= 0)
				close(v[i].fd);
			v[i].fd = -1;
		}
	}
}

/* ---- the plugin ----------------------------------------------------- */

static int cmp_zone_name(const void *a, const void *b)
{
	const struct tt_node *x = a, *y = b;
	int c = tt_natcmp(x->zone, y->zone);
	return c ? c : tt_natcmp(x->name, y->name);
}

static int cmp_str(const void *a, const void *b)
{
	return tt_natcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * tt_distinct writes the distinct values of field (offset into tt_node)
 * into buf as a sorted comma list and returns their count.
 */
int tt_distinct(struct tt_node *v, int n, size_t off, char *buf, size_t len)
{
	const char **vals = calloc(n ? n : 1, sizeof(*vals));
	int nv = 0;
	size_t used = 0;

	buf[0] = '\0';
	if (!vals)
		return -1;
	for (int i = 0; i < n; i++) {
		const char *s = (const char *) &v[i] + off;
		int seen = 0;
		for (int k = 0; k < nv && !seen; k++)
			seen = !strcmp(vals[k], s);
		if (!seen)
			vals[nv++] = s;
	}
	qsort(vals, nv, sizeof(*vals), cmp_str);
	for (int k = 0; k < nv; k++) {
		int w = snprintf(buf + used, len - used, "%s%s", k ? "," : "", vals[k]);
		if (w < 0 || (size_t) w >= len - used)
			break;
		used += w;
	}
	free(vals);
	return nv;
}

/* expand_socket replaces %n in arg_socket with node. */
static void expand_socket(const char *node, char *out, size_t len)
{
	size_t o = 0;
	for (const char *p = arg_socket; *p && o + 1 < len; p++) {
		if (p[0] == '%' && p[1] == 'n') {
			int w = snprintf(out + o, len - o, "%s", node);
			o += (w > 0) ? (size_t) w : 0;
			if (o >= len)
				o = len - 1;
			p++;
			continue;
		}
		out[o++] = *p;
	}
	out[o] = '\0';
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (!strncmp(av[i], "socket=", 7) && av[i][7]) {
			snprintf(arg_socket, sizeof(arg_socket), "%s", av[i] + 7);
		} else if (!strcmp(av[i], "probe=all")) {
			arg_probe_all = 1;
		} else if (!strncmp(av[i], "probe_timeout=", 14)) {
			char *end;
			long t = strtol(av[i] + 14, &end, 10);
			if (*end || t < 1 || t > 3600)
				slurm_error("%s: %s: want 1..3600 seconds; using %d",
					    TT, av[i], DEFAULT_PROBE_TIMEOUT);
			else
				arg_probe_timeout = (int) t;
		} else {
			slurm_error("%s: unknown plugin argument \"%s\" ignored", TT, av[i]);
		}
	}
	/* sbatch and salloc do not read the spank_options table. */
	if (spank_context() == S_CTX_ALLOCATOR &&
	    spank_option_register(sp, &spank_options[0]) != ESPANK_SUCCESS) {
		slurm_error("%s: cannot register --topology", TT);
		return -1;
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	spank_context_t ctx = spank_context();
	if (!opt_mode[0] || (ctx != S_CTX_ALLOCATOR && ctx != S_CTX_LOCAL))
		return 0;
	/* Reaches slurmctld in the job's spank_job_env (job_submit.lua).
	 * An srun inside an allocation has no job to change: ignored. */
	spank_err_t e = spank_job_control_setenv(sp, "TIEE_TOPOLOGY", opt_mode, 1);
	if (e != ESPANK_SUCCESS)
		slurm_debug("%s: TIEE_TOPOLOGY not set: %s", TT, spank_strerror(e));
	return 0;
}

static int getenv_sp(spank_t sp, const char *name, char *buf, int len)
{
	return spank_getenv(sp, name, buf, len) == ESPANK_SUCCESS && buf[0];
}

/* mode_of is --topology, else what the job's spank_job_env carried. */
static const char *mode_of(spank_t sp)
{
	static char env_mode[16];
	if (opt_mode[0])
		return opt_mode;
	if ((getenv_sp(sp, "SPANK_TIEE_TOPOLOGY", env_mode, sizeof(env_mode)) ||
	     getenv_sp(sp, "TIEE_TOPOLOGY", env_mode, sizeof(env_mode))) &&
	    tt_valid_mode(env_mode))
		return env_mode;
	return "";
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	const char *mode = mode_of(sp);
	if (!mode[0] && !arg_probe_all)
		return 0;

	uint32_t jobid = 0, nnodes = 0;
	spank_get_item(sp, S_JOB_ID, &jobid);
	spank_get_item(sp, S_JOB_NNODES, &nnodes);

	/* The step's nodes: srun's SLURM_STEP_NODELIST; a batch step has
	 * only the job's (its script sruns across them). */
	static char list[1 << 16];
	if (!getenv_sp(sp, "SLURM_STEP_NODELIST", list, sizeof(list)) &&
	    !getenv_sp(sp, "SLURM_NODELIST", list, sizeof(list)) &&
	    !getenv_sp(sp, "SLURM_JOB_NODELIST", list, sizeof(list))) {
		slurm_debug("%s: job %u: no node list in the step environment", TT, jobid);
		return 0;
	}
	char **names;
	int nnames;
	if (tt_expand_hostlist(list, &names, &nnames) < 0) {
		slurm_error("%s: job %u: cannot expand node list \"%.200s\"", TT, jobid, list);
		return -1;
	}
	if (nnames <= 1) {
		tt_free_strv(names, nnames);
		return 0;
	}
	slurm_debug("%s: job %u: %d nodes (S_JOB_NNODES %u), mode \"%s\"", TT,
		    jobid, nnames, nnodes, mode);

	char self[256], sock[4096], err[1024];
	uint32_t nodeid = 0;
	/* This node: SLURMD_NODENAME is only in the tasks' environment; the
	 * step's node list at S_JOB_NODEID is it (a batch step: node 0 of the
	 * job's list). The host name is the last resort. */
	if (!getenv_sp(sp, "SLURMD_NODENAME", self, sizeof(self))) {
		if (spank_get_item(sp, S_JOB_NODEID, &nodeid) == ESPANK_SUCCESS &&
		    (int)nodeid < nnames) {
			snprintf(self, sizeof(self), "%s", names[nodeid]);
		} else {
			if (gethostname(self, sizeof(self)) < 0)
				self[0] = '\0';
			self[sizeof(self) - 1] = '\0';
			self[strcspn(self, ".")] = '\0';
		}
	}
	expand_socket(self, sock, sizeof(sock));

	struct tt_node *nodes;
	int nn, rc = -1;
	if (tt_query(sock, names, nnames, &nodes, &nn, err, sizeof(err)) < 0) {
		slurm_error("%s: job %u: %s", TT, jobid, err);
		tt_free_strv(names, nnames);
		return -1;
	}
	tt_free_strv(names, nnames);

	static char zones[1 << 16], blocks[1 << 16];
	int nzones = tt_distinct(nodes, nn, offsetof(struct tt_node, zone), zones, sizeof(zones));
	int nblocks = tt_distinct(nodes, nn, offsetof(struct tt_node, block), blocks, sizeof(blocks));
	struct tt_node *me = NULL;
	for (int i = 0; i < nn; i++)
		if (!strcmp(nodes[i].name, self))
			me = &nodes[i];
	const char *myzone = me ? me->zone : "-";

	/* Probe the others: the local slurmd needs no check. */
	for (int i = 0; i < nn; i++) {
		struct tt_node *n = &nodes[i];
		n->fd = -1;
		n->done = (n == me) || !strcmp(n->addr, "-") || !strcmp(n->port, "-");
		if (n != me && n->done)
			slurm_info("%s: job %u: %s is unknown to the topology API; not probed",
				   TT, jobid, n->name);
	}
	tt_probe(nodes, nn, arg_probe_timeout);
	int failed = 0;
	for (int i = 0; i < nn; i++) {
		struct tt_node *n = &nodes[i];
		if (!n->err)
			continue;
		if (failed++ < MAX_REPORTED)
			slurm_error("%s: job %u: %s (zone %s) cannot reach %s (zone %s) at %s:%s: %s; the job's nodes span zones %s",
				    TT, jobid, self, myzone, n->name, n->zone,
				    n->addr, n->port, strerror(n->err), zones);
	}
	if (failed > MAX_REPORTED)
		slurm_error("%s: job %u: %s cannot reach %d more nodes", TT,
			    jobid, self, failed - MAX_REPORTED);
	if (failed)
		goto out;

	if (!strcmp(mode, "zone") && nzones > 1) {
		slurm_error("%s: job %u: --topology=zone, but the step's nodes span zones %s",
			    TT, jobid, zones);
		goto out;
	}
	/* Without topology/block there are no blocks: a block is a zone. */
	if (!strcmp(mode, "block") && (nblocks > 1 || (!strcmp(blocks, "-") && nzones > 1))) {
		slurm_error("%s: job %u: --topology=block, but the step's nodes span %s %s",
			    TT, jobid, nblocks > 1 ? "blocks" : "zones",
			    nblocks > 1 ? blocks : zones);
		goto out;
	}
	if (!strcmp(mode, "switch") && nzones > 1)
		slurm_info("%s: job %u: --topology=switch: no single leaf switch was free; the nodes span zones %s",
			   TT, jobid, zones);

	/* A rank order that keeps neighbours in one zone. */
	qsort(nodes, nn, sizeof(*nodes), cmp_zone_name);
	me = NULL;
	for (int i = 0; i < nn; i++)
		if (!strcmp(nodes[i].name, self))
			me = &nodes[i];
	static char order[1 << 20];
	size_t used = 0;
	order[0] = '\0';
	for (int i = 0; i < nn; i++) {
		int w = snprintf(order + used, sizeof(order) - used, "%s%s",
				 i ? "," : "", nodes[i].name);
		if (w < 0 || (size_t) w >= sizeof(order) - used)
			break;
		used += w;
	}
	if (spank_setenv(sp, "TIEE_TOPOLOGY_ZONE", me ? me->zone : "-", 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "TIEE_TOPOLOGY_ZONES", zones, 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "TIEE_TOPOLOGY_BLOCK", me ? me->block : "-", 1) != ESPANK_SUCCESS ||
	    spank_setenv(sp, "TIEE_TOPOLOGY_NODES_BY_ZONE", order, 1) != ESPANK_SUCCESS) {
		slurm_error("%s: job %u: cannot set the TIEE_TOPOLOGY_* environment", TT, jobid);
		goto out;
	}
	rc = 0;
out:
	free(nodes);
	return rc;
}

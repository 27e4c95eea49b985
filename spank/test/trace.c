/*
 * trace.c: a SPANK plugin fixture for TiEE's real-cluster tests
 * (slurmd-go/integration/spank_test.go). It implements every slurm_spank_* hook
 * of spank.h and, at each, appends one line to a trace file: the hook, the
 * context, the process's credentials, every spank_get_item item (value or error),
 * both options as spank_option_getopt sees them and the spank_getenv view of a
 * few variables. The lines are meant to be compared between a stock slurmd and
 * slurmd-go, so nothing that differs between two runs is printed raw: pids are
 * printed as relations ("self", "child-of-first"), job ids as numbers the test
 * replaces.
 *
 * Plugin arguments (plugstack.conf: "required /path/trace.so trace=/dir ..."):
 *   trace=<dir>         directory of the trace files (writable by everyone: srun
 *                       and sbatch run as the user). Each process writes
 *                       <dir>/<context>.<pid of the first hook it ran>; task
 *                       children of slurmstepd write to their parent's file.
 *   fail=<hook>[@<ctx>] return -1 from that hook (in that context only: local,
 *                       remote, allocator, slurmd, job_script).
 *
 * Line format: space separated key=value fields, first "hook=<name>".
 * Options: --trace-opt=<arg> (static table; registered in init in the allocator
 * context, which ignores the table) and --trace-flag (registered in init). Environment: TRACE_TAG (client's environ) names a client run;
 * TRACE_SRUN_VAR is read with spank_getenv; user_init sets TRACE_PLUGIN_VAR and
 * unsets TRACE_UNSET_VAR for the tasks.
 *
 * Build: gcc -shared -fPIC -o trace.so trace.c -I<release's include dir>
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(trace, 1);

#define LINE_MAX_LEN 16384
#define MAX_PIDS 64

static char trace_dir[1024];
static char fail_hook[64];
static char fail_ctx[64];
static pid_t first_pid;
static char role[32] = "main";
static int trace_fd = -1;
static pid_t task_pids[MAX_PIDS];
static int n_task_pids;

/* Option values seen by the callbacks. */
static char opt_arg_seen[256];
static int flag_seen;

static int opt_cb(int val, const char *optarg, int remote);

struct spank_option spank_options[] = {
	{ "trace-opt", "ARG", "trace fixture: an option with an argument", 1, 1,
	  opt_cb },
	SPANK_OPTIONS_TABLE_END
};

static struct spank_option flag_option = {
	"trace-flag", NULL, "trace fixture: a flag (registered in init)", 0, 2,
	opt_cb
};

static const char *ctx_name(spank_context_t c)
{
	switch (c) {
	case S_CTX_LOCAL:
		return "local";
	case S_CTX_REMOTE:
		return "remote";
	case S_CTX_ALLOCATOR:
		return "allocator";
	case S_CTX_SLURMD:
		return "slurmd";
	case S_CTX_JOB_SCRIPT:
		return "job_script";
	case S_CTX_ERROR:
		return "error";
	}
	return "unknown";
}

/* Line buffer. */
struct line {
	char buf[LINE_MAX_LEN];
	size_t n;
};

static void add(struct line *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (l->n >= sizeof(l->buf) - 2)
		return;
	va_start(ap, fmt);
	k = vsnprintf(l->buf + l->n, sizeof(l->buf) - 2 - l->n, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	l->n += (size_t)k;
	if (l->n > sizeof(l->buf) - 2)
		l->n = sizeof(l->buf) - 2;
}

/* add_str appends " key=value" with blanks and '=' in value made visible. */
static void add_str(struct line *l, const char *key, const char *v)
{
	add(l, " %s=", key);
	if (v == NULL) {
		add(l, "(null)");
		return;
	}
	if (*v == '\0') {
		add(l, "''");
		return;
	}
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t' || *v == '\n')
			add(l, "_");
		else
			add(l, "%c", *v);
	}
}

static void add_err(struct line *l, const char *key, spank_err_t rc)
{
	add(l, " %s=!%s", key, spank_strerror(rc));
}

static void open_trace(void)
{
	char path[1200];
	const char *ctx = ctx_name(spank_context());
	mode_t old;

	if (trace_dir[0] == '\0')
		return;
	snprintf(path, sizeof(path), "%s/%s.%d", trace_dir, ctx, (int)first_pid);
	old = umask(0);
	trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
	umask(old);
}

static void emit(struct line *l)
{
	l->buf[l->n++] = '\n';
	if (trace_fd < 0)
		open_trace();
	if (trace_fd < 0)
		return;
	if (write(trace_fd, l->buf, l->n) < 0 && errno == EBADF) {
		/* The host closed our descriptor (a task child): reopen. */
		trace_fd = -1;
		open_trace();
		if (trace_fd >= 0 && write(trace_fd, l->buf, l->n) < 0)
			return;
	}
}

static void note_first_pid(void)
{
	if (first_pid == 0)
		first_pid = getpid();
}

static const char *pid_rel(pid_t p)
{
	if (p == getpid())
		return (p == first_pid) ? "self=first" : "self";
	if (p == first_pid)
		return "first";
	if (p == getppid())
		return "parent";
	return "other";
}

static void parse_args(int ac, char **av)
{
	int i;

	for (i = 0; i < ac; i++) {
		if (strncmp(av[i], "trace=", 6) == 0) {
			snprintf(trace_dir, sizeof(trace_dir), "%s", av[i] + 6);
		} else if (strncmp(av[i], "fail=", 5) == 0) {
			char *at;
			snprintf(fail_hook, sizeof(fail_hook), "%s", av[i] + 5);
			at = strchr(fail_hook, '@');
			if (at) {
				*at = '\0';
				snprintf(fail_ctx, sizeof(fail_ctx), "%s", at + 1);
			}
		}
	}
}

static int want_fail(const char *hook)
{
	if (strcmp(fail_hook, hook) != 0)
		return 0;
	if (fail_ctx[0] && strcmp(fail_ctx, ctx_name(spank_context())) != 0)
		return 0;
	return 1;
}

static void add_u32(struct line *l, spank_t sp, const char *key, spank_item_t it)
{
	uint32_t v = 0xdeadbeef;
	spank_err_t rc = spank_get_item(sp, it, &v);

	if (rc != ESPANK_SUCCESS)
		add_err(l, key, rc);
	else
		add(l, " %s=%u", key, v);
}

static void add_items(struct line *l, spank_t sp, const char *hook)
{
	spank_err_t rc;
	uid_t uid = (uid_t)-2;
	gid_t gid = (gid_t)-2;
	uint16_t ncpus = 0xbeef;
	int argc = -1, i, tid = -1, status = -1;
	char **argv = NULL, **env = NULL;
	gid_t *gids = NULL;
	int ngids = -1;
	pid_t tpid = -1;
	char *s = NULL;
	uint64_t mem = 0;

	rc = spank_get_item(sp, S_JOB_UID, &uid);
	if (rc)
		add_err(l, "S_JOB_UID", rc);
	else
		add(l, " S_JOB_UID=%d", (int)uid);
	rc = spank_get_item(sp, S_JOB_GID, &gid);
	if (rc)
		add_err(l, "S_JOB_GID", rc);
	else
		add(l, " S_JOB_GID=%d", (int)gid);
	rc = spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids);
	if (rc) {
		add_err(l, "S_JOB_SUPPLEMENTARY_GIDS", rc);
	} else {
		add(l, " S_JOB_SUPPLEMENTARY_GIDS=");
		if (ngids <= 0 || gids == NULL)
			add(l, "[]");
		for (i = 0; gids && i < ngids; i++)
			add(l, "%s%d", i ? "," : "", (int)gids[i]);
	}
	add_u32(l, sp, "S_JOB_ID", S_JOB_ID);
	add_u32(l, sp, "S_JOB_STEPID", S_JOB_STEPID);
	add_u32(l, sp, "S_JOB_NNODES", S_JOB_NNODES);
	add_u32(l, sp, "S_JOB_NODEID", S_JOB_NODEID);
	add_u32(l, sp, "S_JOB_LOCAL_TASK_COUNT", S_JOB_LOCAL_TASK_COUNT);
	add_u32(l, sp, "S_JOB_TOTAL_TASK_COUNT", S_JOB_TOTAL_TASK_COUNT);
	rc = spank_get_item(sp, S_JOB_NCPUS, &ncpus);
	if (rc)
		add_err(l, "S_JOB_NCPUS", rc);
	else
		add(l, " S_JOB_NCPUS=%u", (unsigned)ncpus);
	rc = spank_get_item(sp, S_JOB_ARGV, &argc, &argv);
	if (rc) {
		add_err(l, "S_JOB_ARGV", rc);
	} else {
		add(l, " S_JOB_ARGV=%d:", argc);
		for (i = 0; argv && i < argc; i++) {
			add(l, "%s", i ? "|" : "");
			add_str(l, "", argv[i]);
		}
	}
	rc = spank_get_item(sp, S_JOB_ENV, &env);
	if (rc) {
		add_err(l, "S_JOB_ENV", rc);
	} else if (env == NULL) {
		add(l, " S_JOB_ENV=(null)");
	} else {
		/* Only the fixture's own variables: the rest differs per cluster. */
		add(l, " S_JOB_ENV=");
		for (i = 0; env[i]; i++)
			if (strncmp(env[i], "TRACE_", 6) == 0)
				add(l, "%s,", env[i]);
	}
	rc = spank_get_item(sp, S_TASK_ID, &tid);
	if (rc)
		add_err(l, "S_TASK_ID", rc);
	else
		add(l, " S_TASK_ID=%d", tid);
	add_u32(l, sp, "S_TASK_GLOBAL_ID", S_TASK_GLOBAL_ID);
	rc = spank_get_item(sp, S_TASK_EXIT_STATUS, &status);
	if (rc)
		add_err(l, "S_TASK_EXIT_STATUS", rc);
	else
		add(l, " S_TASK_EXIT_STATUS=%d", status);
	rc = spank_get_item(sp, S_TASK_PID, &tpid);
	if (rc) {
		add_err(l, "S_TASK_PID", rc);
	} else {
		add(l, " S_TASK_PID=%s", pid_rel(tpid));
		if (strcmp(hook, "task_post_fork") == 0 && n_task_pids < MAX_PIDS)
			task_pids[n_task_pids++] = tpid;
	}
	/* The pid -> id maps: of the task pid where there is one, else of the
	 * pids task_post_fork saw (in exit), else of our own pid. */
	{
		pid_t q[MAX_PIDS];
		int nq = 0, j;

		if (tpid > 0)
			q[nq++] = tpid;
		else if (n_task_pids > 0)
			for (j = 0; j < n_task_pids; j++)
				q[nq++] = task_pids[j];
		else
			q[nq++] = getpid();
		for (j = 0; j < nq; j++) {
			uint32_t g = 0xdeadbeef, lo = 0xdeadbeef;
			spank_err_t r1 = spank_get_item(sp, S_JOB_PID_TO_GLOBAL_ID, q[j], &g);
			spank_err_t r2 = spank_get_item(sp, S_JOB_PID_TO_LOCAL_ID, q[j], &lo);
			if (r1)
				add_err(l, "S_JOB_PID_TO_GLOBAL_ID", r1);
			else
				add(l, " S_JOB_PID_TO_GLOBAL_ID=%u", g);
			if (r2)
				add_err(l, "S_JOB_PID_TO_LOCAL_ID", r2);
			else
				add(l, " S_JOB_PID_TO_LOCAL_ID=%u", lo);
		}
	}
	{
		uint32_t g = 0xdeadbeef, lo = 0xdeadbeef;
		rc = spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, (uint32_t)0, &g);
		if (rc)
			add_err(l, "S_JOB_LOCAL_TO_GLOBAL_ID(0)", rc);
		else
			add(l, " S_JOB_LOCAL_TO_GLOBAL_ID(0)=%u", g);
		rc = spank_get_item(sp, S_JOB_GLOBAL_TO_LOCAL_ID, (uint32_t)0, &lo);
		if (rc)
			add_err(l, "S_JOB_GLOBAL_TO_LOCAL_ID(0)", rc);
		else
			add(l, " S_JOB_GLOBAL_TO_LOCAL_ID(0)=%u", lo);
	}
	{
		static const struct {
			const char *k;
			spank_item_t it;
		} vers[] = {
			{ "S_SLURM_VERSION", S_SLURM_VERSION },
			{ "S_SLURM_VERSION_MAJOR", S_SLURM_VERSION_MAJOR },
			{ "S_SLURM_VERSION_MINOR", S_SLURM_VERSION_MINOR },
			{ "S_SLURM_VERSION_MICRO", S_SLURM_VERSION_MICRO },
		};
		for (i = 0; i < (int)(sizeof(vers) / sizeof(vers[0])); i++) {
			s = NULL;
			rc = spank_get_item(sp, vers[i].it, &s);
			if (rc)
				add_err(l, vers[i].k, rc);
			else
				add_str(l, vers[i].k, s);
		}
	}
	add_u32(l, sp, "S_STEP_CPUS_PER_TASK", S_STEP_CPUS_PER_TASK);
	s = NULL;
	rc = spank_get_item(sp, S_JOB_ALLOC_CORES, &s);
	if (rc)
		add_err(l, "S_JOB_ALLOC_CORES", rc);
	else
		add_str(l, "S_JOB_ALLOC_CORES", s);
	rc = spank_get_item(sp, S_JOB_ALLOC_MEM, &mem);
	if (rc)
		add_err(l, "S_JOB_ALLOC_MEM", rc);
	else
		add(l, " S_JOB_ALLOC_MEM=%llu", (unsigned long long)mem);
	s = NULL;
	rc = spank_get_item(sp, S_STEP_ALLOC_CORES, &s);
	if (rc)
		add_err(l, "S_STEP_ALLOC_CORES", rc);
	else
		add_str(l, "S_STEP_ALLOC_CORES", s);
	mem = 0;
	rc = spank_get_item(sp, S_STEP_ALLOC_MEM, &mem);
	if (rc)
		add_err(l, "S_STEP_ALLOC_MEM", rc);
	else
		add(l, " S_STEP_ALLOC_MEM=%llu", (unsigned long long)mem);
	add_u32(l, sp, "S_SLURM_RESTART_COUNT", S_SLURM_RESTART_COUNT);
	add_u32(l, sp, "S_JOB_ARRAY_ID", S_JOB_ARRAY_ID);
	add_u32(l, sp, "S_JOB_ARRAY_TASK_ID", S_JOB_ARRAY_TASK_ID);
}

static void add_opts(struct line *l, spank_t sp)
{
	char *arg = NULL;
	spank_err_t rc;

	rc = spank_option_getopt(sp, &spank_options[0], &arg);
	if (rc)
		add_err(l, "getopt.trace-opt", rc);
	else
		add_str(l, "getopt.trace-opt", arg);
	arg = NULL;
	rc = spank_option_getopt(sp, &flag_option, &arg);
	if (rc)
		add_err(l, "getopt.trace-flag", rc);
	else
		add_str(l, "getopt.trace-flag", arg ? arg : "set");
	add_str(l, "cb.trace-opt", opt_arg_seen);
	add(l, " cb.trace-flag=%d", flag_seen);
}

static void add_env(struct line *l, spank_t sp, const char *var)
{
	char buf[512];
	spank_err_t rc = spank_getenv(sp, var, buf, sizeof(buf));
	char key[96];

	snprintf(key, sizeof(key), "getenv.%s", var);
	if (rc)
		add_err(l, key, rc);
	else
		add_str(l, key, buf);
}

/* trace writes the line of one hook and returns its return value. */
static int trace(spank_t sp, const char *hook, int ac, char **av,
		 void (*extra)(struct line *, spank_t))
{
	static struct line l;
	const char *tag;

	note_first_pid();
	if (ac >= 0)
		parse_args(ac, av);
	l.n = 0;
	add(&l, "hook=%s ctx=%s remote=%d role=%s pid=%s", hook,
	    ctx_name(spank_context()), spank_remote(sp), role,
	    pid_rel(getpid()));
	add(&l, " ppid=%s", getppid() == first_pid ? "first" : "other");
	add(&l, " uid=%d euid=%d gid=%d egid=%d", (int)getuid(), (int)geteuid(),
	    (int)getgid(), (int)getegid());
	tag = getenv("TRACE_TAG");
	add_str(&l, "tag", tag ? tag : "");
	add(&l, " args=%d", ac);
	add_items(&l, sp, hook);
	add_opts(&l, sp);
	add_env(&l, sp, "TRACE_SRUN_VAR");
	add_env(&l, sp, "TRACE_PLUGIN_VAR");
	add_env(&l, sp, "TRACE_UNSET_VAR");
	if (extra)
		extra(&l, sp);
	if (want_fail(hook)) {
		add(&l, " fail=-1");
		emit(&l);
		return -1;
	}
	emit(&l);
	return 0;
}

static int opt_cb(int val, const char *optarg, int remote)
{
	struct line l;
	const char *tag = getenv("TRACE_TAG");

	note_first_pid();
	if (val == 1)
		snprintf(opt_arg_seen, sizeof(opt_arg_seen), "%s",
			 optarg ? optarg : "(null)");
	else
		flag_seen++;
	l.n = 0;
	add(&l, "hook=option ctx=%s remote=%d role=%s pid=%s val=%d",
	    ctx_name(spank_context()), remote, role, pid_rel(getpid()), val);
	add_str(&l, "optarg", optarg);
	add(&l, " uid=%d euid=%d", (int)getuid(), (int)geteuid());
	add_str(&l, "tag", tag ? tag : "");
	emit(&l);
	return 0;
}

static void init_extra(struct line *l, spank_t sp)
{
	spank_err_t rc = spank_option_register(sp, &flag_option);

	if (rc)
		add_err(l, "register.trace-flag", rc);
	else
		add(l, " register.trace-flag=ok");
	/* sbatch/salloc ignore the static spank_options table
	 * (plugstack.c _spank_plugin_create): register it there too. */
	if (spank_context() == S_CTX_ALLOCATOR) {
		rc = spank_option_register(sp, &spank_options[0]);
		if (rc)
			add_err(l, "register.trace-opt", rc);
		else
			add(l, " register.trace-opt=ok");
	}
}

static void user_init_extra(struct line *l, spank_t sp)
{
	spank_err_t rc;

	rc = spank_setenv(sp, "TRACE_PLUGIN_VAR", "fromplugin", 1);
	add(l, " setenv.TRACE_PLUGIN_VAR=%s", rc ? spank_strerror(rc) : "ok");
	/* overwrite=0 of a variable srun set: ESPANK_ENV_EXISTS. */
	rc = spank_setenv(sp, "TRACE_SRUN_VAR", "overwritten", 0);
	add(l, " setenv.noover.TRACE_SRUN_VAR=%s", rc ? spank_strerror(rc) : "ok");
	rc = spank_unsetenv(sp, "TRACE_UNSET_VAR");
	add(l, " unsetenv.TRACE_UNSET_VAR=%s", rc ? spank_strerror(rc) : "ok");
	rc = spank_option_register(sp, &flag_option);
	add(l, " register.late=%s", rc ? spank_strerror(rc) : "ok");
}

static void task_priv_extra(struct line *l, spank_t sp)
{
	(void)l;
	(void)sp;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	/* Register first, so that the line shows what the callbacks saw. */
	return trace(sp, "init", ac, av, init_extra);
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	return trace(sp, "job_prolog", ac, av, NULL);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	return trace(sp, "init_post_opt", ac, av, NULL);
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	return trace(sp, "local_user_init", ac, av, NULL);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	return trace(sp, "user_init", ac, av, user_init_extra);
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	int tid = -1;

	if (spank_get_item(sp, S_TASK_ID, &tid) == ESPANK_SUCCESS)
		snprintf(role, sizeof(role), "task%d", tid);
	else
		snprintf(role, sizeof(role), "task?");
	return trace(sp, "task_init_privileged", ac, av, task_priv_extra);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	return trace(sp, "task_init", ac, av, NULL);
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	return trace(sp, "task_post_fork", ac, av, NULL);
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	return trace(sp, "task_exit", ac, av, NULL);
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	return trace(sp, "job_epilog", ac, av, NULL);
}

int slurm_spank_slurmd_exit(spank_t sp, int ac, char **av)
{
	return trace(sp, "slurmd_exit", ac, av, NULL);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	return trace(sp, "exit", ac, av, NULL);
}

/* The SPANK API exported to plugins (linked -rdynamic so that plugins,
 * including -znow ones such as pyxis, resolve these at dlopen time). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm_errno.h>
#include "runner.h"

const char *hook_sym[H_NHOOKS] = {
	"slurm_spank_init", "slurm_spank_job_prolog",
	"slurm_spank_init_post_opt", "slurm_spank_local_user_init",
	"slurm_spank_user_init", "slurm_spank_task_init_privileged",
	"slurm_spank_task_init", "slurm_spank_task_post_fork",
	"slurm_spank_task_exit", "slurm_spank_job_epilog",
	"slurm_spank_slurmd_exit", "slurm_spank_exit",
};
const char *hook_name[H_NHOOKS] = {
	"init", "job_prolog", "init_post_opt", "local_user_init", "user_init",
	"task_init_privileged", "task_init", "task_post_fork", "task_exit",
	"job_epilog", "slurmd_exit", "exit",
};

struct plugin *failed_plugin;

/* ---- logging ---- */

int log_to_socket;
int log_task_stderr;
const char *task_err_node;
int task_err_timestamp;

/* The main process sends LOG packets, ordered with its replies, so the step
 * manager knows which phase a line belongs to (stock's errors reach srun only
 * once the step's I/O is up). A task child writes its errors to the task's
 * stderr as slurmstepd's forked child does. */
static int route_line(const char *level, const char *text)
{
	if (log_to_socket) {
		char pkt[8400];
		int n = snprintf(pkt, sizeof(pkt), "LOG%clevel=%s%ctext=%s", 0, level, 0, text);
		if (n > (int)sizeof(pkt) - 1)
			n = sizeof(pkt) - 1;
		pkt[n] = '\0';
		return send(3, pkt, n + 1, MSG_NOSIGNAL) < 0 ? -1 : 0;
	}
	if (log_task_stderr && (strcmp(level, "error") == 0 || strcmp(level, "fatal") == 0)) {
		char pre[80];
		if (task_err_timestamp) {
			struct timespec ts;
			struct tm tm;
			clock_gettime(CLOCK_REALTIME, &ts);
			localtime_r(&ts.tv_sec, &tm);
			size_t k = strftime(pre, sizeof(pre), "[%Y-%m-%dT%H:%M:%S", &tm);
			snprintf(pre + k, sizeof(pre) - k, ".%03ld] %s: ", ts.tv_nsec / 1000000, level);
		} else
			snprintf(pre, sizeof(pre), "slurmstepd-%s: %s: ",
				 task_err_node ? task_err_node : "", level);
		dprintf(2, "%s%s\n", pre, text);
	}
	return -1;
}

static void vlog_line(const char *level, const char *fmt, va_list ap)
{
	char buf[8192];
	int saved = errno;
	{
		char text[8000];
		va_list aq;
		va_copy(aq, ap);
		errno = saved;
		vsnprintf(text, sizeof(text), fmt, aq);
		va_end(aq);
		for (char *c = text; *c; c++)
			if (*c == '\n')
				*c = ' ';
		if (route_line(level, text) == 0) {
			errno = saved;
			return;
		}
	}
	errno = saved;
	int n = snprintf(buf, sizeof(buf), "spank-runner: %s: ", level);
	int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	/* one line per message: the step manager splits on newlines */
	for (int i = 0; i < n; i++)
		if (buf[i] == '\n')
			buf[i] = ' ';
	buf[n++] = '\n';
	if (write(log_fd, buf, n) < 0) {
		/* nothing sensible to do */
	}
	errno = saved;
}

void rlog(const char *level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog_line(level, fmt, ap);
	va_end(ap);
}

#define LOGFN(fn, level)                          \
	void fn(const char *format, ...)          \
	{                                         \
		va_list ap;                       \
		va_start(ap, format);             \
		vlog_line(level, format, ap);     \
		va_end(ap);                       \
	}

LOGFN(slurm_info, "info")
LOGFN(slurm_error, "error")
LOGFN(slurm_verbose, "verbose")
LOGFN(slurm_debug, "debug")
LOGFN(slurm_debug2, "debug2")
LOGFN(slurm_debug3, "debug3")
/* stock prints spank_log at info level regardless of the log level */
LOGFN(slurm_spank_log, "info")

/* ---- env arrays ---- */

static int env_find(struct envv *e, const char *name)
{
	size_t l = strlen(name);
	for (int i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, l) == 0 && e->v[i][l] == '=')
			return i;
	return -1;
}

const char *envv_get(struct envv *e, const char *name)
{
	int i = env_find(e, name);
	return i < 0 ? NULL : e->v[i] + strlen(name) + 1;
}

static void env_grow(struct envv *e)
{
	if (e->n + 2 <= e->cap)
		return;
	int cap = e->cap ? e->cap * 2 : 64;
	/* old array is left alone: a plugin may hold S_JOB_ENV */
	char **v = calloc(cap, sizeof(char *));
	if (!v)
		abort();
	if (e->n)
		memcpy(v, e->v, e->n * sizeof(char *));
	e->v = v;
	e->cap = cap;
}

void envv_put(struct envv *e, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char *copy = strdup(kv);
	if (!copy)
		abort();
	if (eq) {
		char *name = strndup(kv, eq - kv);
		int i = env_find(e, name);
		free(name);
		if (i >= 0) {
			e->v[i] = copy;
			return;
		}
	}
	env_grow(e);
	e->v[e->n++] = copy;
	e->v[e->n] = NULL;
}

int envv_set(struct envv *e, const char *name, const char *val)
{
	char *kv;
	if (asprintf(&kv, "%s=%s", name, val) < 0)
		return -1;
	int i = env_find(e, name);
	if (i >= 0) {
		e->v[i] = kv;
		return 0;
	}
	env_grow(e);
	e->v[e->n++] = kv;
	e->v[e->n] = NULL;
	return 0;
}

void envv_unset(struct envv *e, const char *name)
{
	int i;
	while ((i = env_find(e, name)) >= 0) {
		memmove(&e->v[i], &e->v[i + 1], (e->n - i) * sizeof(char *));
		e->n--;
	}
}

/* ---- the hook loop (plugstack.c _do_call_stack semantics) ---- */

int call_stack(enum hook h, struct task *t)
{
	struct spank_handle sh = { SPANK_MAGIC_RUNNER, h, NULL, t };
	int rc = 0;

	failed_plugin = NULL;
	for (int i = 0; i < nplugins; i++) {
		struct plugin *p = plugins[i];
		if (!p->fn[h])
			continue;
		sh.plugin = p;
		rc = p->fn[h](&sh, p->ac, p->argv);
		const char *base = strrchr(p->path, '/');
		base = base ? base + 1 : p->path;
		rlog("debug2", "spank: %s: %s = %d", base, hook_name[h], rc);
		if (rc && p->required) {
			rlog("error", "spank: required plugin %s: %s() failed with rc=%d",
			     base, hook_name[h], rc);
			failed_plugin = p;
			break;
		}
		rc = 0;
	}
	return rc;
}

/* ---- options ---- */

int option_add(struct plugin *p, struct spank_option *opt)
{
	int disabled = 0;
	for (int i = 0; i < noptions; i++)
		if (strcmp(options[i]->opt.name, opt->name) == 0) {
			rlog("info", "spank: option \"%s\" provided by both %s and %s",
			     opt->name, p->path, options[i]->plugin->path);
			disabled = 1;
		}
	if (strlen(opt->name) > SPANK_OPTION_MAXLEN) {
		rlog("error", "spank: option \"%s\" provided by %s too long. Ignoring.",
		     opt->name, p->name);
		return ESPANK_NOSPACE;
	}
	struct option_ent *o = calloc(1, sizeof(*o));
	if (!o)
		abort();
	o->plugin = p;
	o->opt = *opt;
	o->opt.name = strdup(opt->name);
	o->opt.arginfo = opt->arginfo ? strdup(opt->arginfo) : NULL;
	o->opt.usage = opt->usage ? strdup(opt->usage) : NULL;
	o->disabled = disabled;
	options = realloc(options, (noptions + 1) * sizeof(*options));
	if (!options)
		abort();
	options[noptions++] = o;
	return ESPANK_SUCCESS;
}

static int valid(spank_t sp)
{
	return sp && sp->magic == SPANK_MAGIC_RUNNER;
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	if (!valid(sp) || sp->phase != H_INIT)
		return ESPANK_BAD_ARG;
	if (!opt || !opt->name || !opt->usage)
		return ESPANK_BAD_ARG;
	return option_add(sp->plugin, opt);
}

/* "_SLURM_SPANK_OPTION_<plugin>_<opt>" with non-alphanumerics as '_' */
void option_env_name(struct option_ent *o, char *buf, size_t len);
void option_env_name(struct option_ent *o, char *buf, size_t len)
{
	snprintf(buf, len, "_SLURM_SPANK_OPTION_%s_%s", o->plugin->name,
		 o->opt.name);
	for (char *c = buf + strlen("_SLURM_SPANK_OPTION_"); *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9')))
			*c = '_';
}

spank_err_t spank_option_getopt(spank_t sp, struct spank_option *opt,
				char **argp)
{
	if (argp)
		*argp = NULL;
	if (!valid(sp) || !sp->plugin)
		return ESPANK_NOT_AVAIL;
	switch (sp->phase) {
	case H_INIT: case H_INIT_POST_OPT: case H_TASK_POST_FORK:
	case H_SLURMD_EXIT: case H_EXIT:
		return ESPANK_NOT_AVAIL;
	default:
		break;
	}
	if (!opt || !opt->name)
		return ESPANK_BAD_ARG;
	if (opt->has_arg && !argp)
		return ESPANK_BAD_ARG;

	/* stock looks the name up in the whole cache, not per plugin */
	for (int i = 0; i < noptions; i++) {
		struct option_ent *o = options[i];
		if (strcmp(o->opt.name, opt->name) != 0)
			continue;
		if (!o->found)
			return ESPANK_ERROR;
		if (opt->has_arg && argp)
			*argp = o->optarg;
		return ESPANK_SUCCESS;
	}

	/* unknown option: as stock, try the process env (plain and with the
	 * SPANK_ prefix of prolog/epilog) and cache the result */
	if (option_add(sp->plugin, opt) != ESPANK_SUCCESS)
		return ESPANK_ERROR;
	struct option_ent *o = options[noptions - 1];
	char var[1100] = "SPANK_";
	const char *val;
	option_env_name(o, var + 6, sizeof(var) - 6);
	if ((val = getenv(var + 6)) || (val = getenv(var))) {
		o->optarg = strdup(val);
		o->found = 1;
		if (opt->has_arg && argp)
			*argp = o->optarg;
	}
	return o->found ? ESPANK_SUCCESS : ESPANK_ERROR;
}

/* ---- misc ---- */

const char *spank_strerror(spank_err_t err)
{
	switch ((int)err) {
	case ESPANK_SUCCESS: return "No error";
	case ESPANK_ERROR: return "Generic error";
	case ESPANK_BAD_ARG: return "Bad argument";
	case ESPANK_NOT_TASK: return "Not in task context";
	case ESPANK_ENV_EXISTS: return "Environment variable exists";
	case ESPANK_ENV_NOEXIST: return "No such environment variable";
	case ESPANK_NOSPACE: return "Buffer too small";
	case ESPANK_NOT_REMOTE: return "Valid only in remote context";
	case ESPANK_NOEXIST: return "Id/PID does not exist on this node";
	case ESPANK_NOT_EXECD: return "Lookup by PID requested, but no tasks running";
	case ESPANK_NOT_AVAIL: return "Item not available from this callback";
	case ESPANK_NOT_LOCAL: return "Valid only in local or allocator context";
	default: return strerror(err);
	}
}

int spank_symbol_supported(const char *symbol)
{
	if (!symbol)
		return -1;
	for (int i = 0; i < H_NHOOKS; i++)
		if (strcmp(hook_sym[i], symbol) == 0)
			return 1;
	return 0;
}

int spank_remote(spank_t sp)
{
	if (!valid(sp))
		return -1;
	return step.ctx == T_REMOTE;
}

spank_context_t spank_context(void)
{
	switch (step.ctx) {
	case T_REMOTE: return S_CTX_REMOTE;
	case T_JOB_SCRIPT: return S_CTX_JOB_SCRIPT;
	case T_SLURMD: return S_CTX_SLURMD;
	}
	return S_CTX_ERROR;
}

/* ---- items (plugstack.c spank_get_item, remote/job_script/slurmd) ---- */

static struct task *task_by_pid(pid_t pid)
{
	for (int i = 0; i < step.ntasks; i++)
		if (step.tasks[i].pid > 0 && step.tasks[i].pid == pid)
			return &step.tasks[i];
	return NULL;
}

static int tasks_execd(spank_t sp)
{
	return sp->phase == H_TASK_POST_FORK || sp->phase == H_TASK_EXIT ||
	       sp->phase == H_EXIT;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	spank_err_t rc = ESPANK_SUCCESS;
	struct task *t;

	if (!valid(sp))
		return ESPANK_BAD_ARG;
	switch (item) {
	case S_SLURM_VERSION: case S_SLURM_VERSION_MAJOR:
	case S_SLURM_VERSION_MINOR: case S_SLURM_VERSION_MICRO:
		break;
	default:
		if (step.ctx == T_SLURMD)
			return ESPANK_NOT_AVAIL;
		if (step.ctx == T_JOB_SCRIPT && item != S_JOB_UID &&
		    item != S_JOB_GID && item != S_JOB_ID)
			return ESPANK_NOT_AVAIL;
	}

	va_start(ap, item);
	switch (item) {
	case S_JOB_UID:
		*va_arg(ap, uid_t *) = step.uid;
		break;
	case S_JOB_GID:
		*va_arg(ap, gid_t *) = step.gid;
		break;
	case S_JOB_ID:
		*va_arg(ap, uint32_t *) = step.jobid;
		break;
	case S_JOB_STEPID:
		*va_arg(ap, uint32_t *) = step.stepid;
		break;
	case S_JOB_NNODES:
		*va_arg(ap, uint32_t *) = step.nnodes;
		break;
	case S_JOB_NODEID:
		*va_arg(ap, uint32_t *) = step.nodeid;
		break;
	case S_JOB_LOCAL_TASK_COUNT:
		*va_arg(ap, uint32_t *) = step.local_tasks;
		break;
	case S_JOB_TOTAL_TASK_COUNT:
		*va_arg(ap, uint32_t *) = step.total_tasks;
		break;
	case S_JOB_NCPUS:
		*va_arg(ap, uint16_t *) = step.ncpus;
		break;
	case S_JOB_ARGV: {
		int *pc = va_arg(ap, int *);
		char ***pv = va_arg(ap, char ***);
		*pc = step.argc;
		*pv = step.argv;
		break;
	}
	case S_JOB_ENV:
		*va_arg(ap, char ***) = cur_env->v;
		break;
	case S_TASK_ID: {
		int *p = va_arg(ap, int *);
		if (!sp->task) {
			*p = -1;
			rc = ESPANK_NOT_TASK;
		} else
			*p = sp->task->id;
		break;
	}
	case S_TASK_GLOBAL_ID: {
		uint32_t *p = va_arg(ap, uint32_t *);
		if (!sp->task)
			rc = ESPANK_NOT_TASK;
		else
			*p = sp->task->gtid;
		break;
	}
	case S_TASK_EXIT_STATUS: {
		int *p = va_arg(ap, int *);
		if (!sp->task || !sp->task->exited)
			rc = ESPANK_NOT_TASK;
		else
			*p = sp->task->status;
		break;
	}
	case S_TASK_PID: {
		pid_t *p = va_arg(ap, pid_t *);
		if (!sp->task) {
			*p = 0;
			rc = ESPANK_NOT_TASK;
		} else
			*p = sp->task->pid;
		break;
	}
	case S_JOB_PID_TO_GLOBAL_ID:
	case S_JOB_PID_TO_LOCAL_ID: {
		pid_t pid = va_arg(ap, pid_t);
		uint32_t *p = va_arg(ap, uint32_t *);
		*p = (uint32_t)-1;
		if (!tasks_execd(sp))
			rc = ESPANK_NOT_EXECD;
		else if (!(t = task_by_pid(pid)))
			rc = ESPANK_NOEXIST;
		else
			*p = item == S_JOB_PID_TO_GLOBAL_ID ? t->gtid
							    : (uint32_t)t->id;
		break;
	}
	case S_JOB_LOCAL_TO_GLOBAL_ID: {
		uint32_t l = va_arg(ap, uint32_t);
		uint32_t *p = va_arg(ap, uint32_t *);
		*p = (uint32_t)-1;
		if (l < (uint32_t)step.ntasks)
			*p = step.tasks[l].gtid;
		else
			rc = ESPANK_NOEXIST;
		break;
	}
	case S_JOB_GLOBAL_TO_LOCAL_ID: {
		uint32_t g = va_arg(ap, uint32_t);
		uint32_t *p = va_arg(ap, uint32_t *);
		*p = (uint32_t)-1;
		if (g >= step.total_tasks) {
			rc = ESPANK_BAD_ARG;
			break;
		}
		rc = ESPANK_NOEXIST;
		for (int i = 0; i < step.ntasks; i++)
			if (step.tasks[i].gtid == g) {
				*p = step.tasks[i].id;
				rc = ESPANK_SUCCESS;
				break;
			}
		break;
	}
	case S_JOB_SUPPLEMENTARY_GIDS: {
		gid_t **pg = va_arg(ap, gid_t **);
		int *pn = va_arg(ap, int *);
		*pg = step.gids;
		*pn = step.ngids;
		break;
	}
	case S_SLURM_VERSION:
		*va_arg(ap, char **) = step.slurm_version;
		break;
	case S_SLURM_VERSION_MAJOR:
		*va_arg(ap, char **) = step.v_major;
		break;
	case S_SLURM_VERSION_MINOR:
		*va_arg(ap, char **) = step.v_minor;
		break;
	case S_SLURM_VERSION_MICRO:
		*va_arg(ap, char **) = step.v_micro;
		break;
	case S_STEP_CPUS_PER_TASK:
		*va_arg(ap, uint32_t *) = step.cpus_per_task;
		break;
	case S_JOB_ALLOC_CORES:
		*va_arg(ap, char **) = step.job_alloc_cores;
		break;
	case S_JOB_ALLOC_MEM:
		*va_arg(ap, uint64_t *) = step.job_alloc_mem;
		break;
	case S_STEP_ALLOC_CORES:
		*va_arg(ap, char **) = step.step_alloc_cores;
		break;
	case S_STEP_ALLOC_MEM:
		*va_arg(ap, uint64_t *) = step.step_alloc_mem;
		break;
	case S_SLURM_RESTART_COUNT:
		*va_arg(ap, uint32_t *) = step.restart_count;
		break;
	case S_JOB_ARRAY_ID:
		*va_arg(ap, uint32_t *) = step.array_id;
		break;
	case S_JOB_ARRAY_TASK_ID:
		*va_arg(ap, uint32_t *) = step.array_task_id;
		break;
	default:
		rc = ESPANK_BAD_ARG;
	}
	va_end(ap);
	return rc;
}

/* ---- env functions ---- */

static spank_err_t env_check(spank_t sp)
{
	if (!valid(sp))
		return ESPANK_BAD_ARG;
	if (step.ctx != T_REMOTE)
		return ESPANK_NOT_REMOTE;
	return ESPANK_SUCCESS;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	spank_err_t rc = env_check(sp);
	if (rc)
		return rc;
	if (len < 0 || !var)
		return ESPANK_BAD_ARG;
	const char *val = envv_get(cur_env, var);
	if (!val)
		return ESPANK_ENV_NOEXIST;
	size_t l = strlen(val);
	if (len > 0 && buf) {
		size_t c = l < (size_t)len - 1 ? l : (size_t)len - 1;
		memcpy(buf, val, c);
		buf[c] = '\0';
	}
	if (l >= (size_t)len)
		return ESPANK_NOSPACE;
	return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val,
			 int overwrite)
{
	spank_err_t rc = env_check(sp);
	if (rc)
		return rc;
	if (!var || !val)
		return ESPANK_BAD_ARG;
	if (envv_get(cur_env, var) && !overwrite)
		return ESPANK_ENV_EXISTS;
	if (envv_set(cur_env, var, val) < 0)
		return ESPANK_ERROR;
	return ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	spank_err_t rc = env_check(sp);
	if (rc)
		return rc;
	if (!var)
		return ESPANK_BAD_ARG;
	envv_unset(cur_env, var);
	return ESPANK_SUCCESS;
}

/* Job-control env lives in srun/sbatch (spank_*_job_env in the host
 * executable); as in stock slurmstepd it is absent here. */
static spank_err_t jc_check(spank_t sp)
{
	if (!valid(sp))
		return ESPANK_BAD_ARG;
	if (step.ctx == T_REMOTE)
		return ESPANK_NOT_LOCAL;
	if (step.ctx == T_SLURMD)
		return ESPANK_NOT_AVAIL;
	return ESPANK_SUCCESS;
}

static void *host_sym(const char *name)
{
	void *h = dlopen(NULL, RTLD_LAZY);
	return h ? dlsym(h, name) : NULL;
}

spank_err_t spank_job_control_getenv(spank_t sp, const char *name, char *buf,
				     int len)
{
	spank_err_t rc = jc_check(sp);
	if (rc)
		return rc;
	if (!name || !buf || len <= 0)
		return ESPANK_BAD_ARG;
	const char *(*fn)(const char *) = host_sym("spank_get_job_env");
	const char *val = fn ? fn(name) : NULL;
	if (!val)
		return ESPANK_ENV_NOEXIST;
	if ((size_t)snprintf(buf, len, "%s", val) >= (size_t)len)
		return ESPANK_NOSPACE;
	return ESPANK_SUCCESS;
}

spank_err_t spank_job_control_setenv(spank_t sp, const char *name,
				     const char *value, int overwrite)
{
	spank_err_t rc = jc_check(sp);
	if (rc)
		return rc;
	if (!name || !value)
		return ESPANK_BAD_ARG;
	int (*fn)(const char *, const char *, int) = host_sym("spank_set_job_env");
	if (!fn || fn(name, value, overwrite) < 0)
		return ESPANK_BAD_ARG;
	return ESPANK_SUCCESS;
}

spank_err_t spank_job_control_unsetenv(spank_t sp, const char *name)
{
	spank_err_t rc = jc_check(sp);
	if (rc)
		return rc;
	if (!name)
		return ESPANK_BAD_ARG;
	int (*fn)(const char *) = host_sym("spank_unset_job_env");
	if (!fn || fn(name) < 0)
		return ESPANK_BAD_ARG;
	return ESPANK_SUCCESS;
}

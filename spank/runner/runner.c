/* spank-runner: hosts SPANK plugins for one step of the Go step manager.
 * Protocol: PROTOCOL.md. Facts and limits: README.md. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm_errno.h>
#include "runner.h"

#define SOCK_FD 3
#define MAX_PKT (4 << 20)
#define MAX_FDS 64

struct stepinfo step;
struct plugin **plugins;
int nplugins;
struct option_ent **options;
int noptions;
struct envv step_env;
struct envv *cur_env = &step_env;
int log_fd = 2;

void option_env_name(struct option_ent *o, char *buf, size_t len);

static char *plugstack, *plugindir;
static int helper_fd = -1;
static struct envv initial_env; /* the STEP env, for READY's delta */
static char **jobopts;
static int njobopts;
static char *pkt;

/* ---- packets ---- */

struct msg {
	char *cmd;
	char **f; /* key=value fields */
	int nf;
	int fds[MAX_FDS];
	int nfds;
};

static const char *mget(struct msg *m, const char *key)
{
	size_t l = strlen(key);
	for (int i = 0; i < m->nf; i++)
		if (strncmp(m->f[i], key, l) == 0 && m->f[i][l] == '=')
			return m->f[i] + l + 1;
	return NULL;
}

static uint64_t mnum(struct msg *m, const char *key, uint64_t def)
{
	const char *v = mget(m, key);
	return v && *v ? strtoull(v, NULL, 0) : def;
}

/* Returns 1 on a message, 0 on EOF, -1 on error. Fields point into pkt. */
static int recv_msg(struct msg *m)
{
	static char cbuf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
	static char *fields[MAX_PKT / 2];
	struct iovec iov = { pkt, MAX_PKT - 1 };
	struct msghdr mh = { 0 };
	ssize_t n;

	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	do
		n = recvmsg(SOCK_FD, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	m->nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			memcpy(m->fds + m->nfds, CMSG_DATA(c), k * sizeof(int));
			m->nfds += k;
		}
	pkt[n] = '\0';
	int nf = 0;
	for (char *p = pkt; p < pkt + n; p += strlen(p) + 1)
		fields[nf++] = p;
	if (nf == 0)
		return -1;
	m->cmd = fields[0];
	m->f = fields + 1;
	m->nf = nf - 1;
	return 1;
}

struct out {
	char *b;
	size_t n, cap;
};

static void out_add(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void out_add(struct out *o, const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int l = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (l < 0)
		abort();
	if (o->n + l + 1 > o->cap) {
		o->cap = (o->n + l + 1) * 2;
		o->b = realloc(o->b, o->cap);
		if (!o->b)
			abort();
	}
	memcpy(o->b + o->n, s, l + 1);
	o->n += l + 1;
	free(s);
}

static void out_send(struct out *o)
{
	if (send(SOCK_FD, o->b, o->n, MSG_NOSIGNAL) < 0)
		rlog("error", "send: %m");
	free(o->b);
	o->b = NULL;
	o->n = o->cap = 0;
}

static void send_simple(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* fmt uses '\x1f' between fields; converted to NUL */
static void send_simple(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int l = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (l < 0)
		abort();
	for (int i = 0; i < l; i++)
		if (s[i] == '\x1f')
			s[i] = '\0';
	if (send(SOCK_FD, s, l + 1, MSG_NOSIGNAL) < 0)
		rlog("error", "send: %m");
	free(s);
}

/* ---- loader (plugstack.c / plugin.c rules) ---- */

enum { PEEK, LOAD };

/* dlopen + name/type/version check; spank plugins match major.minor */
static void *open_plugin(const char *path, int how)
{
	void *h = dlopen(path, RTLD_LAZY);
	if (!h) {
		if (how == LOAD)
			rlog("error", "plugin_load_from_file: dlopen(%s): %s", path,
			     dlerror());
		return NULL;
	}
	const char *name = dlsym(h, "plugin_name");
	const char *type = dlsym(h, "plugin_type");
	const uint32_t *ver = dlsym(h, "plugin_version");
	if (!name || !type || !ver) {
		if (how == LOAD)
			rlog("verbose", "%s is not a Slurm plugin (plugin_name, "
			     "plugin_type or plugin_version missing)", path);
		dlclose(h);
		return NULL;
	}
	uint32_t mask = strcmp(type, "spank") == 0 ? 0xffff00 : 0xffffff;
	if ((*ver & mask) != (step.version_number & mask)) {
		if (how == LOAD)
			rlog("info", "Incompatible Slurm plugin %s version (%d.%02d.%d)",
			     path, (*ver >> 16) & 0xff, (*ver >> 8) & 0xff,
			     *ver & 0xff);
		dlclose(h);
		return NULL;
	}
	if (how == PEEK) {
		dlclose(h);
		return (void *)1;
	}
	int (*init)(void) = (int (*)(void))dlsym(h, "init");
	if (init && init() != 0) {
		rlog("error", "spank: %s: Plugin init() callback failed", path);
		dlclose(h);
		return NULL;
	}
	return h;
}

static char *find_in_plugindir(const char *file)
{
	char *dirs = strdup(plugindir ? plugindir : "");
	char *save = NULL, *res = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		char *fq;
		if (asprintf(&fq, "%s%s%s", d, d[strlen(d) - 1] == '/' ? "" : "/",
			     file) < 0)
			abort();
		if (open_plugin(fq, PEEK)) {
			res = fq;
			break;
		}
		free(fq);
	}
	free(dirs);
	return res;
}

static int valid_for_context(struct plugin *p)
{
	switch (step.ctx) {
	case T_JOB_SCRIPT:
		return p->fn[H_JOB_PROLOG] || p->fn[H_JOB_EPILOG];
	case T_SLURMD:
		return p->fn[H_INIT] || p->fn[H_SLURMD_EXIT];
	default:
		return 1;
	}
}

static int load_file(const char *file);

static int include_glob(const char *file, int line, const char *pattern)
{
	char *full = NULL;
	glob_t gl;
	int rc = 0;

	if (pattern[0] != '/') {
		char *dc = strdup(file);
		if (asprintf(&full, "%s/%s", dirname(dc), pattern) < 0)
			abort();
		free(dc);
		pattern = full;
	}
	rlog("debug", "%s: %d: include \"%s\"", file, line, pattern);
	int g = glob(pattern, 0, NULL, &gl);
	if (g == 0) {
		for (size_t i = 0; i < gl.gl_pathc && rc == 0; i++)
			rc = load_file(gl.gl_pathv[i]);
	} else if (g == GLOB_ABORTED) {
		rlog("verbose", "%s:%d: cannot read dir %s", file, line, pattern);
	}
	if (g != GLOB_NOMATCH)
		globfree(&gl);
	free(full);
	return rc;
}

static int process_line(const char *file, int line, char *buf)
{
	char *save = NULL, *c;
	const char *sep = " \t\n";

	if ((c = strchr(buf, '#')))
		*c = '\0';
	char *kw = strtok_r(buf, sep, &save);
	if (!kw)
		return 0;
	int required;
	if (strcmp(kw, "required") == 0)
		required = 1;
	else if (strcmp(kw, "optional") == 0)
		required = 0;
	else if (strcmp(kw, "include") == 0) {
		char *pat = strtok_r(NULL, sep, &save);
		if (!pat) {
			rlog("error", "spank: %s:%d: Invalid line. Ignoring.", file, line);
			return 0;
		}
		return include_glob(file, line, pat);
	} else {
		/* stock logs and ignores such a line */
		rlog("error", "spank: Invalid option \"%s\". Must be required, "
		     "optional or include", kw);
		rlog("error", "spank: %s:%d: Invalid line. Ignoring.", file, line);
		return 0;
	}
	char *path = strtok_r(NULL, sep, &save);
	if (!path) {
		rlog("error", "spank: %s:%d: Invalid line. Ignoring.", file, line);
		return 0;
	}
	char **av = calloc(1, sizeof(char *));
	int ac = 0;
	for (char *a; (a = strtok_r(NULL, sep, &save));) {
		av = realloc(av, (ac + 2) * sizeof(char *));
		av[ac++] = strdup(a);
		av[ac] = NULL;
	}
	char *fq = NULL;
	if (path[0] != '/')
		fq = find_in_plugindir(path);
	if (!fq)
		fq = strdup(path);

	struct plugin *p = NULL;
	void *h = open_plugin(fq, LOAD);
	int nsyms = 0;
	if (h) {
		p = calloc(1, sizeof(*p));
		for (int i = 0; i < H_NHOOKS; i++)
			if ((p->fn[i] = (spank_f *)dlsym(h, hook_sym[i])))
				nsyms++;
		if (!nsyms) {
			rlog("error", "spank: \"%s\" exports 0 symbols", fq);
			free(p);
			p = NULL;
		}
	}
	if (!p) {
		if (required) {
			rlog("error", "spank: %s:%d: Failed to load plugin %s. Aborting.",
			     file, line, fq);
			send_simple("FAIL\x1fphase=load\x1fplugin=%s\x1frc=-1\x1f"
				    "msg=%s:%d: Failed to load plugin %s", path,
				    file, line, fq);
			return -2;
		}
		rlog("verbose", "spank: %s:%d:Failed to load optional plugin %s. Ignored.",
		     file, line, fq);
		return 0;
	}
	p->path = fq;
	p->name = dlsym(h, "plugin_name");
	p->required = required;
	p->ac = ac;
	p->argv = av;
	for (int i = 0; i < nplugins; i++)
		if (strcmp(plugins[i]->path, fq) == 0) {
			rlog("error", "spank: %s: cowardly refusing to load a second time",
			     fq);
			free(p);
			return 0;
		}
	if (!valid_for_context(p)) {
		rlog("debug2", "spank: %s: no callbacks in this context", fq);
		free(p);
		return 0;
	}
	rlog("debug", "spank: %s:%d: Loaded plugin %s", file, line, fq);
	plugins = realloc(plugins, (nplugins + 1) * sizeof(*plugins));
	plugins[nplugins++] = p;
	p->opts = dlsym(h, "spank_options");
	for (struct spank_option *o = p->opts; o && o->name; o++)
		option_add(p, o);
	return 0;
}

/* 0 ok, <0 broken (FAIL already sent) */
static int load_file(const char *file)
{
	FILE *fp = fopen(file, "re");
	char buf[4096];
	int line = 1, rc = 0;

	if (!fp) {
		if (errno == ENOENT)
			return 0; /* missing = no plugins */
		rlog("error", "spank: Failed to open %s: %m", file);
		send_simple("FAIL\x1fphase=load\x1fplugin=\x1frc=-1\x1fmsg=Failed to open %s: %s",
			    file, strerror(errno));
		return -2;
	}
	while (fgets(buf, sizeof(buf), fp)) {
		if ((rc = process_line(file, line, buf)) < 0)
			break;
		line++;
	}
	fclose(fp);
	return rc;
}

/* ---- options from the launch message and the step env ---- */

static void option_cb(struct option_ent *o, const char *arg)
{
	if (o->opt.cb && o->opt.cb(o->opt.val, arg, 1)) {
		rlog("error", "spank: failed to process option %s=%s", o->opt.name,
		     arg ? arg : "(null)");
		return;
	}
	if (o->opt.has_arg && arg)
		o->optarg = strdup(arg);
	o->found = 1;
}

static void process_options(void)
{
	char var[1100];

	for (int j = 0; j < njobopts; j++) {
		/* "<opt>:<plugin>=<optarg>" */
		char *s = strdup(jobopts[j]);
		char *eq = strchr(s, '=');
		const char *arg = NULL; /* "<opt>:<plugin>" alone: no optarg */
		if (eq) {
			*eq = '\0';
			arg = eq + 1;
		}
		char *colon = strchr(s, ':');
		if (!colon) {
			rlog("error", "Malformed plugin option \"%s\" received. Ignoring", s);
			free(s);
			continue;
		}
		*colon = '\0';
		struct option_ent *o = NULL;
		for (int i = 0; i < noptions && !o; i++)
			if (strcmp(options[i]->plugin->name, colon + 1) == 0 &&
			    strcmp(options[i]->opt.name, s) == 0)
				o = options[i];
		if (!o)
			rlog("error", "Warning: SPANK plugin \"%s\" option \"%s\" not found",
			     colon + 1, s);
		else {
			option_cb(o, arg);
			o->from_jobopt = 1;
		}
		free(s);
	}
	/* after 22.05 (24.11's spank_stack_post_opt found_opts): an option the
	 * launch message gave is not taken from the environment again */
	int skip_found = step.version_number > 0x1605ff;
	for (int i = 0; i < noptions; i++) {
		option_env_name(options[i], var, sizeof(var));
		const char *arg = envv_get(&step_env, var);
		if (!arg || (skip_found && options[i]->from_jobopt))
			continue;
		option_cb(options[i], arg);
		envv_unset(&step_env, var);
	}
	/* clear any remaining option variables, as stock does */
	const char *pfx = "_SLURM_SPANK_OPTION_";
	for (int i = 0; i < step_env.n;) {
		const char *e = step_env.v[i];
		if (strncmp(e, "SPANK_", 6) == 0)
			e += 6;
		const char *eq = strchr(step_env.v[i], '=');
		if (eq && strncmp(e, pfx, strlen(pfx)) == 0) {
			char *name = strndup(step_env.v[i], eq - step_env.v[i]);
			envv_unset(&step_env, name);
			free(name);
			continue;
		}
		i++;
	}
}

/* ---- credentials ---- */

static gid_t root_groups[NGROUPS_MAX], root_egid;
static int root_ngroups;
static char saved_cwd[4096];

static int drop_euid(void)
{
	root_ngroups = getgroups(NGROUPS_MAX, root_groups);
	root_egid = getegid();
	if (!getcwd(saved_cwd, sizeof(saved_cwd)))
		strcpy(saved_cwd, "/");
	if (setegid(step.gid) < 0 ||
	    setgroups(step.ngids ? step.ngids : 1, step.ngids ? step.gids : &step.gid) < 0 ||
	    seteuid(step.uid) < 0) {
		rlog("error", "drop privileges: %m");
		return -1;
	}
	prctl(PR_SET_DUMPABLE, 1);
	if (step.cwd && chdir(step.cwd) < 0) {
		rlog("error", "couldn't chdir to `%s': %m: going to /tmp instead", step.cwd);
		if (chdir("/tmp") < 0) {
			rlog("error", "couldn't chdir to /tmp either. dying.");
			return -1;
		}
	}
	return 0;
}

static void reclaim_root(void)
{
	if (seteuid(0) < 0 || setegid(root_egid) < 0 ||
	    setgroups(root_ngroups > 0 ? root_ngroups : 0, root_groups) < 0)
		rlog("error", "reclaim privileges: %m");
	if (chdir(saved_cwd) < 0)
		rlog("error", "Unable to return to working directory");
}

/* ---- tasks ---- */

static void kill_tasks(void)
{
	for (int i = 0; i < step.ntasks; i++)
		if (step.tasks[i].pid > 0 && !step.tasks[i].exited)
			kill(step.tasks[i].pid, SIGKILL);
}

static int move_high(int fd, int min)
{
	int n = fcntl(fd, F_DUPFD_CLOEXEC, min);
	if (n < 0)
		_exit(1);
	return n;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The task child: never returns (PROTOCOL.md "The child"). */
static void child(struct task *t, struct msg *m, int gate_r, struct envv *tenv,
		  int pgid, int do_setsid, int do_ctty)
{
	sigset_t all;
	struct sigaction dfl = { 0 };
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);

	if (do_setsid)
		setsid();
	else if (pgid >= 0) /* -1: stay in the runner's group (pty steps) */
		setpgid(0, pgid);

	int nfd = m->nfds, hi = nfd + 16;
	int tmp[MAX_FDS];
	for (int i = 0; i < nfd; i++)
		tmp[i] = move_high(m->fds[i], hi);
	log_fd = move_high(log_fd, hi);
	int hfd = move_high(helper_fd, hi);
	int gfd = move_high(gate_r, hi);
	for (int i = 0; i < nfd; i++)
		if (dup2(tmp[i], i) < 0)
			_exit(1);
	log_to_socket = 0; /* closed here: errors go to the task's stderr */
	log_task_stderr = 1;
	int keep[3] = { log_fd, hfd, gfd };
	qsort(keep, 3, sizeof(int), cmp_int);
	unsigned lo = nfd;
	for (int k = 0; k < 3; k++) {
		if ((unsigned)keep[k] > lo)
			syscall(SYS_close_range, lo, keep[k] - 1, 0);
		lo = keep[k] + 1;
	}
	syscall(SYS_close_range, lo, ~0U, 0);

	if (do_ctty && ioctl(0, TIOCSCTTY, 0) < 0)
		rlog("error", "TIOCSCTTY: %m");

	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		if (write(oom, "0", 1) < 0)
			rlog("debug", "oom_score_adj: %m");
		close(oom);
	}
	int lim[3] = { RLIMIT_CPU, RLIMIT_CORE, RLIMIT_NOFILE };
	for (int i = 0; i < 3; i++) {
		struct rlimit rl;
		if (getrlimit(lim[i], &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(lim[i], &rl);
		}
	}

	t->pid = -1; /* as stock's child: its copy still has task_info_create's -1 */
	cur_env = tenv;
	struct envv orig = { 0 };
	for (int i = 0; i < tenv->n; i++)
		envv_put(&orig, tenv->v[i]);

	/* stock forks as the user, from the user_init process in the job's
	 * cwd: the child's hooks all run there (an euid drop for the chdir, so
	 * that a root-squashed directory the user can enter still works) */
	if (step.cwd) {
		if (setegid(step.gid) < 0 || seteuid(step.uid) < 0)
			rlog("error", "drop privileges: %m");
		if (chdir(step.cwd) < 0 && chdir("/tmp") < 0)
			_exit(1);
		if (seteuid(0) < 0 || setegid(0) < 0)
			_exit(1);
	}
	/* stock: mgr.c _pre_task_child_privileged → _exit(1) */
	if (call_stack(H_TASK_INIT_PRIV, t) < 0) {
		rlog("error", "spank_task_init_privileged failed");
		/* 24.11+: _fork_all_tasks fatal()s on it */
		if (step.version_number >= 0x180b00)
			rlog("fatal", "_fork_all_tasks: _pre_task_child_privileged() failed: Unspecified error");
		_exit(1);
	}
	if (setgroups(step.ngids ? step.ngids : 1, step.ngids ? step.gids : &step.gid) < 0 ||
	    setregid(step.gid, step.gid) < 0 || setreuid(step.uid, step.uid) < 0) {
		rlog("error", "_become_user failed: %m");
		_exit(1);
	}
	char c;
	ssize_t r;
	do
		r = read(gfd, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		_exit(1); /* runner gave up on this task */
	close(gfd);
	/* stock: task.c exec_task → error(...), _exit(1) */
	if (call_stack(H_TASK_INIT, t) < 0) {
		rlog("error", "Failed to invoke spank plugin stack");
		_exit(1);
	}

	/* envp = what task-context hooks changed, plus the removals */
	struct envv delta = { 0 };
	for (int i = 0; i < tenv->n; i++) {
		const char *eq = strchr(tenv->v[i], '=');
		if (!eq)
			continue;
		char *name = strndup(tenv->v[i], eq - tenv->v[i]);
		const char *ov = envv_get(&orig, name);
		if (!ov || strcmp(ov, eq + 1) != 0)
			envv_put(&delta, tenv->v[i]);
		free(name);
	}
	struct out un = { 0 };
	out_add(&un, "_TIEE_SPANK_UNSET=");
	un.n--;
	int first = 1;
	for (int i = 0; i < orig.n; i++) {
		const char *eq = strchr(orig.v[i], '=');
		if (!eq)
			continue;
		char *name = strndup(orig.v[i], eq - orig.v[i]);
		if (!envv_get(tenv, name)) {
			out_add(&un, "%s%s", first ? "" : "\x1f", name);
			un.n--;
			first = 0;
		}
		free(name);
	}
	envv_put(&delta, un.b);
	char *argv[] = { "slurmstepd-go", "task", "spank", NULL };
	syscall(SYS_execveat, hfd, "", argv, delta.v, AT_EMPTY_PATH);
	int e = errno;
	rlog("error", "execveat(helper): %s", strerror(e));
	_exit(e ? e : 1);
}

static void do_task(struct msg *m)
{
	int i = (int)mnum(m, "i", (uint64_t)-1);
	int pgid = (int)mnum(m, "pgid", 0);
	int do_setsid = (int)mnum(m, "setsid", 0);
	int do_ctty = (int)mnum(m, "ctty", 0);

	if (i < 0 || i >= step.ntasks || step.tasks[i].pid > 0 || helper_fd < 0) {
		send_simple("TASKFAIL\x1fi=%d\x1frc=%d\x1fmsg=bad task index or no helper",
			    i, EINVAL);
		goto out;
	}
	struct task *t = &step.tasks[i];
	struct envv *tenv = calloc(1, sizeof(*tenv));
	for (int k = 0; k < m->nf; k++)
		if (strncmp(m->f[k], "env=", 4) == 0)
			envv_put(tenv, m->f[k] + 4);
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) < 0) {
		send_simple("TASKFAIL\x1fi=%d\x1frc=%d\x1fmsg=pipe: %s", i, errno,
			    strerror(errno));
		goto out;
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(gate[0]);
		close(gate[1]);
		send_simple("TASKFAIL\x1fi=%d\x1frc=%d\x1fmsg=fork: %s", i, e, strerror(e));
		goto out;
	}
	if (pid == 0) {
		close(gate[1]);
		close(SOCK_FD);
		child(t, m, gate[0], tenv, pgid, do_setsid, do_ctty);
	}
	close(gate[0]);
	t->gate_w = gate[1];
	t->pid = pid;
	if (!do_setsid && pgid >= 0)
		setpgid(pid, pgid); /* both sides, to close the race */
	send_simple("PID\x1fi=%d\x1fpid=%d", i, (int)pid);
out:
	for (int k = 0; k < m->nfds; k++)
		close(m->fds[k]);
}

static void reap(void)
{
	for (int i = 0; i < step.ntasks; i++) {
		struct task *t = &step.tasks[i];
		if (t->pid <= 0 || t->exited)
			continue;
		int st;
		struct rusage ru;
		pid_t r = wait4(t->pid, &st, WNOHANG, &ru);
		if (r != t->pid)
			continue;
		t->exited = 1;
		t->status = st;
		if (t->gate_w >= 0) {
			close(t->gate_w);
			t->gate_w = -1;
		}
		send_simple("EXIT\x1fi=%d\x1fstatus=%d\x1futime_us=%lld\x1fstime_us=%lld"
			    "\x1fmaxrss_kb=%ld\x1fminflt=%ld\x1fmajflt=%ld\x1fnvcsw=%ld"
			    "\x1fnivcsw=%ld\x1finblock=%ld\x1foublock=%ld",
			    i, st,
			    (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
			    (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
			    ru.ru_maxrss, ru.ru_minflt, ru.ru_majflt, ru.ru_nvcsw,
			    ru.ru_nivcsw, ru.ru_inblock, ru.ru_oublock);
	}
}

/* Kill and reap our tasks (no EXIT messages: the step failed). */
static void kill_and_reap(void)
{
	kill_tasks();
	for (int i = 0; i < step.ntasks; i++)
		if (step.tasks[i].pid > 0 && !step.tasks[i].exited) {
			int st;
			while (waitpid(step.tasks[i].pid, &st, 0) < 0 && errno == EINTR)
				;
			step.tasks[i].exited = 1;
		}
}

static void fail(enum hook h, int rc, int call_exit)
{
	send_simple("FAIL\x1fphase=%s\x1fplugin=%s\x1frc=%d\x1fmsg=spank: required plugin %s: %s() failed with rc=%d",
		    hook_name[h], failed_plugin ? failed_plugin->name : "", rc,
		    failed_plugin ? failed_plugin->name : "", hook_name[h], rc);
	if (call_exit) {
		struct plugin *fp = failed_plugin;
		if (call_stack(H_EXIT, NULL) < 0)
			rlog("error", "spank_fini failed");
		failed_plugin = fp;
	}
	exit(1);
}

/* ---- STEP ---- */

static char *dupstr(struct msg *m, const char *k)
{
	const char *v = mget(m, k);
	return v ? strdup(v) : NULL;
}

static void parse_step(struct msg *m)
{
	const char *mode = mget(m, "mode");
	snprintf(step.mode, sizeof(step.mode), "%s", mode ? mode : "tasks");
	if (!strcmp(step.mode, "prolog") || !strcmp(step.mode, "epilog"))
		step.ctx = T_JOB_SCRIPT;
	else if (!strcmp(step.mode, "slurmd"))
		step.ctx = T_SLURMD;
	else
		step.ctx = T_REMOTE;
	plugstack = dupstr(m, "plugstack");
	plugindir = dupstr(m, "plugindir");
	step.version_number = (uint32_t)mnum(m, "version_number", SLURM_VERSION_NUMBER);
	step.slurm_version = dupstr(m, "slurm_version");
	if (!step.slurm_version) {
		uint32_t v = step.version_number;
		if (asprintf(&step.slurm_version, "%u.%02u.%u", (v >> 16) & 0xff,
			     (v >> 8) & 0xff, v & 0xff) < 0)
			abort();
	}
	char *vs = strdup(step.slurm_version), *save = NULL;
	char *a = strtok_r(vs, ".", &save), *b = strtok_r(NULL, ".", &save),
	     *c = strtok_r(NULL, ".", &save);
	step.v_major = strdup(a ? a : "");
	step.v_minor = strdup(b ? b : "");
	step.v_micro = strdup(c ? c : "");
	free(vs);
	step.uid = (uid_t)mnum(m, "uid", 0);
	step.gid = (gid_t)mnum(m, "gid", 0);
	step.user = dupstr(m, "user");
	step.cwd = dupstr(m, "cwd");
	step.jobid = (uint32_t)mnum(m, "jobid", 0);
	step.stepid = (uint32_t)mnum(m, "stepid", 0);
	step.nnodes = (uint32_t)mnum(m, "nnodes", 1);
	step.nodeid = (uint32_t)mnum(m, "nodeid", 0);
	step.total_tasks = (uint32_t)mnum(m, "total_tasks", 0);
	step.ncpus = (uint16_t)mnum(m, "ncpus", 0);
	step.cpus_per_task = (uint32_t)mnum(m, "cpus_per_task", 1);
	step.restart_count = (uint32_t)mnum(m, "restart_count", 0);
	step.job_alloc_cores = dupstr(m, "job_alloc_cores");
	step.step_alloc_cores = dupstr(m, "step_alloc_cores");
	step.job_alloc_mem = mnum(m, "job_alloc_mem", 0);
	step.step_alloc_mem = mnum(m, "step_alloc_mem", 0);
	step.array_id = (uint32_t)mnum(m, "array_id", 0);
	step.array_task_id = (uint32_t)mnum(m, "array_task_id", 0);

	int ntasks = 0, argc = 0, ng = 0;
	for (int i = 0; i < m->nf; i++) {
		ntasks += !strncmp(m->f[i], "task=", 5);
		argc += !strncmp(m->f[i], "argv=", 5);
		ng += !strncmp(m->f[i], "sgid=", 5);
		njobopts += !strncmp(m->f[i], "jobopt=", 7);
	}
	step.tasks = calloc(ntasks + 1, sizeof(struct task));
	step.argv = calloc(argc + 1, sizeof(char *));
	step.gids = calloc(ng + 1, sizeof(gid_t));
	jobopts = calloc(njobopts + 1, sizeof(char *));
	njobopts = 0;
	for (int i = 0; i < m->nf; i++) {
		const char *f = m->f[i];
		if (!strncmp(f, "task=", 5)) {
			struct task *t = &step.tasks[step.ntasks];
			t->id = step.ntasks++;
			t->gtid = (uint32_t)strtoul(f + 5, NULL, 0);
			t->gate_w = -1;
		} else if (!strncmp(f, "argv=", 5))
			step.argv[step.argc++] = strdup(f + 5);
		else if (!strncmp(f, "sgid=", 5))
			step.gids[step.ngids++] = (gid_t)strtoul(f + 5, NULL, 0);
		else if (!strncmp(f, "jobopt=", 7))
			jobopts[njobopts++] = strdup(f + 7);
		else if (!strncmp(f, "env=", 4)) {
			envv_put(&step_env, f + 4);
			envv_put(&initial_env, f + 4);
		}
	}
	step.local_tasks = (uint32_t)mnum(m, "local_tasks", step.ntasks);
	if (!step.total_tasks)
		step.total_tasks = step.ntasks;
	if (!step_env.v)
		envv_put(&step_env, "_=_"), envv_unset(&step_env, "_");
	task_err_node = dupstr(m, "node");
	task_err_timestamp = (int)mnum(m, "err_timestamp", 0);
	const char *helper = mget(m, "helper");
	if (helper && *helper) {
		helper_fd = open(helper, O_PATH | O_CLOEXEC);
		if (helper_fd < 0)
			rlog("error", "open helper %s: %m", helper);
	}
}

static void send_ready(void)
{
	struct out o = { 0 };
	out_add(&o, "READY");
	for (int i = 0; i < step_env.n; i++) {
		const char *eq = strchr(step_env.v[i], '=');
		if (!eq)
			continue;
		char *name = strndup(step_env.v[i], eq - step_env.v[i]);
		const char *ov = envv_get(&initial_env, name);
		if (!ov || strcmp(ov, eq + 1) != 0)
			out_add(&o, "set=%s", step_env.v[i]);
		free(name);
	}
	for (int i = 0; i < initial_env.n; i++) {
		const char *eq = strchr(initial_env.v[i], '=');
		if (!eq)
			continue;
		char *name = strndup(initial_env.v[i], eq - initial_env.v[i]);
		if (!envv_get(&step_env, name))
			out_add(&o, "unset=%s", name);
		free(name);
	}
	if (step.ctx == T_SLURMD) {
		/* slurmd runs the job_script stack only for these hooks */
		int pro = 0, epi = 0;
		for (int i = 0; i < nplugins; i++) {
			pro |= plugins[i]->fn[H_JOB_PROLOG] != NULL;
			epi |= plugins[i]->fn[H_JOB_EPILOG] != NULL;
		}
		out_add(&o, "has_prolog=%d", pro);
		out_add(&o, "has_epilog=%d", epi);
	}
	out_send(&o);
}

int main(void)
{
	struct msg m;
	int rc;

	/* our own log fd, CLOEXEC, kept by task children for their errors */
	log_fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
	if (log_fd < 0)
		log_fd = 2;
	int sz = MAX_PKT;
	setsockopt(SOCK_FD, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(SOCK_FD, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	fcntl(SOCK_FD, F_SETFD, FD_CLOEXEC);
	pkt = malloc(MAX_PKT);
	if (!pkt)
		return 1;

	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

	if ((rc = recv_msg(&m)) <= 0 || strcmp(m.cmd, "STEP") != 0) {
		rlog("error", "expected STEP");
		return 1;
	}
	parse_step(&m);
	for (int k = 0; k < m.nfds; k++)
		close(m.fds[k]);
	log_to_socket = 1;

	if (plugstack && load_file(plugstack) < 0)
		return 1;

	if (step.ctx == T_JOB_SCRIPT) {
		/* `slurmstepd spank prolog` runs with the script env as its own:
		 * plugins (and spank_option_getopt) getenv() it */
		for (int i = 0; i < step_env.n; i++)
			putenv(step_env.v[i]);
		enum hook h = strcmp(step.mode, "prolog") == 0 ? H_JOB_PROLOG : H_JOB_EPILOG;
		rc = call_stack(h, NULL);
		send_simple("DONE\x1frc=%d", rc);
		return 0;
	}

	int tasks_mode = !strcmp(step.mode, "tasks") || !strcmp(step.mode, "batch");
	/* stock: init/init_post_opt failure → fail1, no exit hooks */
	if ((rc = call_stack(H_INIT, NULL)) < 0)
		fail(H_INIT, rc, 0);
	if (step.ctx == T_REMOTE) {
		process_options();
		if ((rc = call_stack(H_INIT_POST_OPT, NULL)) < 0)
			fail(H_INIT_POST_OPT, rc, 0);
	}
	if (tasks_mode) {
		/* stock sets up the step's I/O between spank_init and
		 * spank_user: the step manager says when (USER) */
		send_ready();
		if ((rc = recv_msg(&m)) <= 0 || strcmp(m.cmd, "USER") != 0)
			return 1;
		if (drop_euid() < 0) {
			reclaim_root();
			failed_plugin = NULL;
			fail(H_USER_INIT, -1, 1);
		}
		rc = call_stack(H_USER_INIT, NULL);
		reclaim_root();
		if (rc < 0)
			fail(H_USER_INIT, rc, 1);
	}
	send_ready();

	struct pollfd pfd[2] = { { SOCK_FD, POLLIN, 0 }, { sfd, POLLIN, 0 } };
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			reap();
		}
		if (!pfd[0].revents)
			continue;
		rc = recv_msg(&m);
		if (rc <= 0) {
			/* step manager gone: kill, no more hooks */
			kill_tasks();
			return 1;
		}
		if (!strcmp(m.cmd, "TASK") && tasks_mode) {
			do_task(&m);
			continue;
		}
		for (int k = 0; k < m.nfds; k++)
			close(m.fds[k]);
		int i = (int)mnum(&m, "i", (uint64_t)-1);
		struct task *t = (i >= 0 && i < step.ntasks) ? &step.tasks[i] : NULL;
		if (!strcmp(m.cmd, "GO") && t && t->pid > 0) {
			if ((rc = call_stack(H_TASK_POST_FORK, t)) < 0) {
				rlog("error", "spank task %d post-fork failed", i);
				kill_and_reap();
				fail(H_TASK_POST_FORK, rc, 1);
			}
			if (t->gate_w >= 0) {
				if (write(t->gate_w, "", 1) != 1)
					rlog("error", "write to unblock task %d failed: %m", i);
				close(t->gate_w);
				t->gate_w = -1;
			}
			send_simple("POSTFORK\x1fi=%d\x1frc=0", i);
		} else if (!strcmp(m.cmd, "REAPED")) {
			rc = 0;
			if (t && t->exited && !t->reaped) {
				t->reaped = 1;
				rc = call_stack(H_TASK_EXIT, t);
				if (rc < 0)
					rlog("error", "Unable to spank task %d at exit", i);
			} else
				rlog("error", "REAPED for task %d, which has not exited", i);
			send_simple("TASKEXIT\x1fi=%d\x1frc=%d", i, rc);
		} else if (!strcmp(m.cmd, "EXTERN")) {
			/* S_JOB_PID_TO_* find nothing: the pid is not a task */
			rc = call_stack(H_TASK_POST_FORK, NULL);
			if (rc < 0)
				rlog("error", "spank extern task post-fork failed");
			send_simple("POSTFORK\x1fi=-1\x1frc=%d", rc);
		} else if (!strcmp(m.cmd, "FINI")) {
			if (step.ctx == T_SLURMD)
				rc = call_stack(H_SLURMD_EXIT, NULL);
			else
				rc = call_stack(H_EXIT, NULL);
			if (rc < 0)
				rlog("error", "spank_fini failed");
			send_simple("DONE\x1frc=%d", rc);
			return 0;
		} else {
			rlog("error", "unexpected message %s", m.cmd);
		}
	}
	kill_tasks();
	return 1;
}

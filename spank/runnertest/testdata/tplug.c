/* Test SPANK plugin: traces every hook (credentials, items) to trace=<file>;
 * fail=<hook> makes that hook return -1. Built with -DPNAME and -DPVER. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <slurm/spank.h>
#include <slurm/slurm_version.h>

#ifndef PNAME
#define PNAME "tplug"
#endif
#ifndef PVER
#define PVER SLURM_VERSION_NUMBER
#endif

const char plugin_name[] = PNAME;
const char plugin_type[] = "spank";
const unsigned int plugin_version = PVER;

static char trace[512];
static char failhook[64];

static void tr(const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "%s ", PNAME);
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	buf[n++] = '\n';
	int fd = open(trace, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	if (fd >= 0) {
		if (write(fd, buf, n) < 0) {
		}
		close(fd);
	}
}

static int cb(int val, const char *optarg, int remote)
{
	tr("opt val=%d arg=%s remote=%d", val, optarg ? optarg : "(null)", remote);
	return 0;
}

struct spank_option spank_options[] = {
	{ "opt-a", "ARG", "option a", 1, 1, cb },
	{ "opt-c", "ARG", "option c", 1, 3, cb },
	SPANK_OPTIONS_TABLE_END
};
static struct spank_option opt_b = { "opt-b", "ARG", "option b", 1, 2, cb };

static void args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (!strncmp(av[i], "trace=", 6))
			snprintf(trace, sizeof(trace), "%s", av[i] + 6);
		if (!strncmp(av[i], "fail=", 5))
			snprintf(failhook, sizeof(failhook), "%s", av[i] + 5);
	}
}

static int hook(const char *name, spank_t sp, int ac, char **av)
{
	uid_t ruid, euid, suid;
	args(ac, av);
	getresuid(&ruid, &euid, &suid);
	uint32_t jobid = 0, stepid = 0, gtid = 99, ntasks = 0;
	int taskid = -9;
	pid_t tpid = -9;
	int r_tid = spank_get_item(sp, S_TASK_ID, &taskid);
	spank_get_item(sp, S_JOB_ID, &jobid);
	spank_get_item(sp, S_JOB_STEPID, &stepid);
	spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &ntasks);
	spank_get_item(sp, S_TASK_GLOBAL_ID, &gtid);
	spank_get_item(sp, S_TASK_PID, &tpid);
	tr("hook=%s euid=%d ruid=%d egid=%d ctx=%d remote=%d jobid=%u stepid=%u ntasks=%u "
	   "taskid=%d taskid_rc=%d gtid=%u tpid=%d pid=%d",
	   name, (int)euid, (int)ruid, (int)getegid(), (int)spank_context(),
	   spank_remote(sp), jobid, stepid, ntasks, taskid, r_tid, gtid, (int)tpid,
	   (int)getpid());
	return strcmp(failhook, name) == 0 ? -1 : 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	args(ac, av);
	int rc = spank_option_register(sp, &opt_b);
	char *arg = NULL;
	tr("register rc=%d getopt_init=%d", rc, spank_option_getopt(sp, &spank_options[0], &arg));
	char *v = NULL;
	spank_get_item(sp, S_SLURM_VERSION, &v);
	tr("version=%s", v ? v : "(null)");
	return hook("init", sp, ac, av);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	tr("register_post rc=%d", spank_option_register(sp, &opt_b));
	return hook("init_post_opt", sp, ac, av);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	char *a = NULL, *b = NULL, *c = NULL;
	int ra = spank_option_getopt(sp, &spank_options[0], &a);
	int rb = spank_option_getopt(sp, &opt_b, &b);
	int rc = spank_option_getopt(sp, &spank_options[1], &c);
	tr("getopt a=%d:%s b=%d:%s c=%d:%s", ra, a ? a : "", rb, b ? b : "", rc, c ? c : "");
	char buf[64];
	tr("setenv_user rc=%d exists_rc=%d getenv_rc=%d",
	   spank_setenv(sp, "TPLUG_USER", "u-" PNAME, 1),
	   spank_setenv(sp, "STEPVAR", "nope", 0),
	   spank_getenv(sp, "STEPVAR", buf, sizeof(buf)));
	char small[2];
	int nospace = spank_getenv(sp, "STEPVAR", small, sizeof(small));
	int noexist = spank_getenv(sp, "NOPE_NOT_SET", small, sizeof(small));
	tr("getenv STEPVAR=%s nospace=%d noexist=%d", buf, nospace, noexist);
	spank_unsetenv(sp, "STEPDROP");
	tr("jc rc=%d", spank_job_control_setenv(sp, "X", "Y", 1));
	return hook("user_init", sp, ac, av);
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	return hook("task_init_privileged", sp, ac, av);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	int tid = -1;
	char buf[32];
	spank_get_item(sp, S_TASK_ID, &tid);
	snprintf(buf, sizeof(buf), "%d", tid);
	spank_setenv(sp, "TPLUG_TASK", buf, 1);
	spank_unsetenv(sp, "TASKDROP");
	return hook("task_init", sp, ac, av);
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	pid_t p = 0;
	uint32_t g = 77;
	spank_get_item(sp, S_TASK_PID, &p);
	int rc = spank_get_item(sp, S_JOB_PID_TO_GLOBAL_ID, p, &g);
	tr("pid2global rc=%d g=%u", rc, g);
	return hook("task_post_fork", sp, ac, av);
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	int st = -1;
	int rc = spank_get_item(sp, S_TASK_EXIT_STATUS, &st);
	int tid = -1;
	spank_get_item(sp, S_TASK_ID, &tid);
	tr("exitstatus task=%d rc=%d status=%d", tid, rc, st);
	return hook("task_exit", sp, ac, av);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	return hook("exit", sp, ac, av);
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	uid_t u = 0;
	args(ac, av);
	int urc = spank_get_item(sp, S_JOB_UID, &u);
	uint32_t sid;
	int src = spank_get_item(sp, S_JOB_STEPID, &sid);
	tr("prolog uid_rc=%d uid=%d stepid_rc=%d", urc, (int)u, src);
	return hook("job_prolog", sp, ac, av);
}

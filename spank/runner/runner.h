/* Shared state of the spank-runner (see PROTOCOL.md and README.md). */
#ifndef TIEE_SPANK_RUNNER_H
#define TIEE_SPANK_RUNNER_H

#include <stdint.h>
#include <sys/types.h>
#include <slurm/spank.h>

enum hook {
	H_INIT, H_JOB_PROLOG, H_INIT_POST_OPT, H_LOCAL_USER_INIT, H_USER_INIT,
	H_TASK_INIT_PRIV, H_TASK_INIT, H_TASK_POST_FORK, H_TASK_EXIT,
	H_JOB_EPILOG, H_SLURMD_EXIT, H_EXIT, H_NHOOKS
};

extern const char *hook_sym[H_NHOOKS];
extern const char *hook_name[H_NHOOKS];

enum ctxtype { T_REMOTE, T_JOB_SCRIPT, T_SLURMD };

struct plugin {
	char *path;
	const char *name; /* plugin_name inside the .so */
	int required;
	int ac;
	char **argv;
	spank_f *fn[H_NHOOKS];
	struct spank_option *opts;
};

struct option_ent {
	struct plugin *plugin;
	struct spank_option opt; /* private copy */
	int found;
	int from_jobopt; /* given by the launch message's job options */
	int disabled;
	char *optarg;
};

/* Growable NULL-terminated env array; superseded arrays and strings are
 * never freed so pointers handed to plugins stay valid. */
struct envv {
	char **v;
	int n, cap;
};

struct task {
	int id;
	uint32_t gtid;
	pid_t pid;
	int exited;
	int status;
	int gate_w; /* write end of the exec gate, -1 once opened */
	int reaped;
};

#define SPANK_MAGIC_RUNNER 0x7e5a9c01u

struct spank_handle {
	unsigned magic;
	enum hook phase;
	struct plugin *plugin;
	struct task *task;
};

struct stepinfo {
	char mode[16];
	enum ctxtype ctx;
	uint32_t version_number;
	char *slurm_version, *v_major, *v_minor, *v_micro;
	uid_t uid;
	gid_t gid;
	char *user;
	gid_t *gids;
	int ngids;
	char *cwd;
	uint32_t jobid, stepid, nnodes, nodeid, local_tasks, total_tasks;
	uint16_t ncpus;
	uint32_t cpus_per_task, restart_count, array_id, array_task_id;
	char *job_alloc_cores, *step_alloc_cores;
	uint64_t job_alloc_mem, step_alloc_mem;
	int argc;
	char **argv;
	struct task *tasks;
	int ntasks;
};

extern struct stepinfo step;
extern struct plugin **plugins;
extern int nplugins;
extern struct option_ent **options;
extern int noptions;
extern struct envv step_env;
extern struct envv *cur_env; /* step env, or the task's env in the child */
extern int log_fd;
extern int log_to_socket;      /* main process: LOG packets on fd 3 */
extern int log_task_stderr;    /* task child: errors to the task's stderr */
extern const char *task_err_node;
extern int task_err_timestamp;
extern struct plugin *failed_plugin;

void rlog(const char *level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

const char *envv_get(struct envv *e, const char *name);
int envv_set(struct envv *e, const char *name, const char *val);
void envv_unset(struct envv *e, const char *name);
void envv_put(struct envv *e, const char *kv);

int option_add(struct plugin *p, struct spank_option *opt);
int call_stack(enum hook h, struct task *t);

#endif

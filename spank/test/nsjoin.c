/*
 * nsjoin.c: a SPANK plugin fixture for TiEE's real-cluster tests
 * (slurmd-go/integration/spank_test.go, TestSpank_NSJoin). It does what a
 * container plugin such as pyxis does (shared/reference/spank-ckpt.md §1.7),
 * without a container runtime:
 *
 *   user_init (remote, euid = the user, ruid 0, the process that forks the
 *     tasks): maps a MAP_SHARED|MAP_ANONYMOUS page holding a process-shared
 *     mutex and the container's state, and forks a "container" process that
 *     becomes the user fully, unshares a user and a UTS namespace (and a mount
 *     namespace, if the kernel allows it), maps the user to itself
 *     (setgroups deny), sets the hostname "nsjoin-<jobid>", says it is ready
 *     through a pipe and waits to be killed.
 *   task_init (each task, already the user): under the mutex, takes the
 *     container's pid and counts itself, then setns(2) into the container's
 *     user namespace and then its UTS namespace (setns into a user namespace
 *     fails with EINVAL in a multi-threaded process: this is why a task child
 *     must be single-threaded) and sets NSJOIN_CONTAINER=<pid> for the task.
 *   exit (remote, the user_init process): kills and reaps the container.
 *
 * Only for steps that run user_init: not the extern step (which has no
 * user_init) and not the batch step (skipped, so that a batch script runs on
 * the host as usual). Errors: slurm_error("nsjoin: <call>: <why>") and -1.
 *
 * Build: gcc -shared -fPIC -o nsjoin.so nsjoin.c -I<release's include dir>
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(nsjoin, 1);

/* The shared state: one page, inherited by every task child. */
struct shared {
	pthread_mutex_t mu;
	pid_t pid;  /* the container process, 0 before it is ready */
	int joined; /* tasks that joined it */
};

static struct shared *shm;
static pid_t container_pid;

/* What the container reports on its readiness pipe. */
struct ready {
	int err;        /* 0: ready; else the errno of call */
	char call[64];  /* the failing call */
};

static int is_batch_step(spank_t sp)
{
	uint32_t step = 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return 0;
	return step == 0xfffffffb; /* SLURM_BATCH_SCRIPT */
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	int e = errno;
	close(fd);
	if (n != (ssize_t)strlen(s)) {
		errno = n < 0 ? e : EIO;
		return -1;
	}
	return 0;
}

/* Close every descriptor but keep: the container must not hold the step's pipes
 * (slurmstepd waits for their EOF before the exit hook). */
static void close_fds(int keep)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	DIR *d = opendir("/proc/self/fd");
	if (!d) {
		for (int i = 3; i < 4096; i++)
			if (i != keep)
				close(i);
		return;
	}
	int fds[1024], n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < 1024) {
		int i = atoi(e->d_name);
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9' && i > 2 && i != keep &&
		    i != dirfd(d))
			fds[n++] = i;
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

/* The container process: never returns. */
static void container(int wfd, uid_t uid, gid_t gid, pid_t parent, uint32_t jobid)
{
	struct ready r = { 0 };
	char buf[64];

	close_fds(wfd);
#define FAIL(what)                                                          \
	do {                                                                \
		r.err = errno ? errno : EINVAL;                             \
		snprintf(r.call, sizeof(r.call), "%s", what);               \
		goto fail;                                                  \
	} while (0)
	/* euid is already the user, rgid/ruid 0: each new id is one of the
	 * current ones, so no privilege is needed */
	if (setresgid(gid, gid, gid) < 0)
		FAIL("setresgid");
	if (setresuid(uid, uid, uid) < 0)
		FAIL("setresuid");
	/* /proc/self/{uid,gid}_map and the task's /proc/<pid>/ns access need a
	 * dumpable process (the euid change of the step cleared it) */
	if (prctl(PR_SET_DUMPABLE, 1) < 0)
		FAIL("prctl(PR_SET_DUMPABLE)");
	if (unshare(CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWNS) < 0 &&
	    unshare(CLONE_NEWUSER | CLONE_NEWUTS) < 0)
		FAIL("unshare(CLONE_NEWUSER|CLONE_NEWUTS)");
	if (write_file("/proc/self/setgroups", "deny") < 0)
		FAIL("write /proc/self/setgroups");
	snprintf(buf, sizeof(buf), "%u %u 1", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", buf) < 0)
		FAIL("write /proc/self/uid_map");
	snprintf(buf, sizeof(buf), "%u %u 1", (unsigned)gid, (unsigned)gid);
	if (write_file("/proc/self/gid_map", buf) < 0)
		FAIL("write /proc/self/gid_map");
	snprintf(buf, sizeof(buf), "nsjoin-%u", (unsigned)jobid);
	if (sethostname(buf, strlen(buf)) < 0)
		FAIL("sethostname");
	/* Last: every credential change above clears the parent-death signal.
	 * It fires when the forking thread (the user_init one) ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		FAIL("prctl(PR_SET_PDEATHSIG)");
	if (getppid() != parent)
		_exit(0);
	prctl(PR_SET_DUMPABLE, 1);
#undef FAIL
	pthread_mutex_lock(&shm->mu);
	shm->pid = getpid();
	pthread_mutex_unlock(&shm->mu);
	if (write(wfd, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	close(wfd);
	for (;;)
		pause();
fail:
	if (write(wfd, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	_exit(1);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE || is_batch_step(sp))
		return 0;

	uid_t uid;
	gid_t gid;
	uint32_t jobid;
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS) {
		slurm_error("nsjoin: spank_get_item(S_JOB_UID/GID/ID) failed");
		return -1;
	}

	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		shm = NULL;
		slurm_error("nsjoin: mmap: %s", strerror(errno));
		return -1;
	}
	pthread_mutexattr_t ma;
	int e;
	if ((e = pthread_mutexattr_init(&ma)) != 0 ||
	    (e = pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED)) != 0 ||
	    (e = pthread_mutex_init(&shm->mu, &ma)) != 0) {
		slurm_error("nsjoin: pthread_mutex_init(PTHREAD_PROCESS_SHARED): %s",
			    strerror(e));
		return -1;
	}
	pthread_mutexattr_destroy(&ma);

	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		slurm_error("nsjoin: pipe2: %s", strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		slurm_error("nsjoin: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		container(p[1], uid, gid, parent, jobid);
	}
	close(p[1]);
	container_pid = pid;

	struct ready r;
	ssize_t n;
	do
		n = read(p[0], &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n != sizeof(r)) {
		slurm_error("nsjoin: container %d died before it was ready", (int)pid);
		return -1;
	}
	if (r.err) {
		slurm_error("nsjoin: container: %s: %s", r.call, strerror(r.err));
		return -1;
	}
	slurm_info("nsjoin: container %d ready for job %u", (int)pid, jobid);
	return 0;
}

static int join(pid_t pid, const char *ns, int nstype)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		slurm_error("nsjoin: open %s: %s", path, strerror(errno));
		return -1;
	}
	if (setns(fd, nstype) < 0) {
		slurm_error("nsjoin: setns(%s): %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (!shm)
		return 0; /* batch step, or no user_init in this process */

	pthread_mutex_lock(&shm->mu);
	pid_t pid = shm->pid;
	if (pid > 0)
		shm->joined++;
	pthread_mutex_unlock(&shm->mu);
	if (pid <= 0) {
		slurm_error("nsjoin: task_init: no container");
		return -1;
	}
	if (join(pid, "user", CLONE_NEWUSER) < 0 || join(pid, "uts", CLONE_NEWUTS) < 0)
		return -1;
	char v[32];
	snprintf(v, sizeof(v), "%d", (int)pid);
	spank_err_t err = spank_setenv(sp, "NSJOIN_CONTAINER", v, 1);
	if (err != ESPANK_SUCCESS) {
		slurm_error("nsjoin: spank_setenv(NSJOIN_CONTAINER): %s", spank_strerror(err));
		return -1;
	}
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	/* only the user_init process has a container; task children exec or
	 * _exit without this hook */
	if (spank_context() != S_CTX_REMOTE || container_pid <= 0 || getpid() == container_pid)
		return 0;
	kill(container_pid, SIGKILL);
	waitpid(container_pid, NULL, 0); /* ECHILD if the step's own wait reaped it */
	container_pid = 0;
	if (shm) {
		munmap(shm, sizeof(*shm));
		shm = NULL;
	}
	return 0;
}

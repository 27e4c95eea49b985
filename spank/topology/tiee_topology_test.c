/*
 * Test harness for tiee_topology.c: the plugin with the SPANK API stubbed
 * (environment from the command line, setenv and log lines printed).
 * Driven by slurmd-go/internal/topoapi's plugin_test.go:
 *
 *   harness expand <hostlist>...
 *   harness run <socket> <nodelist> <self> <mode|-> [plugin args...]
 */
#include "tiee_topology.c"

#include <stdarg.h>

static const char *env_nodelist, *env_self;

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	(void) sp;
	const char *v = NULL;
	if (!strcmp(var, "SLURM_STEP_NODELIST"))
		v = env_nodelist;
	else if (!strcmp(var, "SLURMD_NODENAME"))
		v = env_self;
	if (!v)
		return ESPANK_ENV_NOEXIST;
	if ((int) strlen(v) >= len)
		return ESPANK_NOSPACE;
	strcpy(buf, v);
	return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int ov)
{
	(void) sp;
	(void) ov;
	printf("setenv %s=%s\n", var, val);
	return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	(void) sp;
	va_list ap;
	va_start(ap, item);
	uint32_t *p = va_arg(ap, uint32_t *);
	va_end(ap);
	*p = item == S_JOB_ID ? 42 : 2;
	return ESPANK_SUCCESS;
}

spank_context_t spank_context(void) { return S_CTX_REMOTE; }
spank_err_t spank_option_register(spank_t sp, struct spank_option *o) { (void) sp; (void) o; return ESPANK_SUCCESS; }
spank_err_t spank_job_control_setenv(spank_t sp, const char *n, const char *v, int o) { (void) sp; (void) n; (void) v; (void) o; return ESPANK_SUCCESS; }
const char *spank_strerror(spank_err_t e) { (void) e; return "stub"; }

#define LOGF(prefix) { va_list ap; va_start(ap, f); printf(prefix); vprintf(f, ap); printf("\n"); va_end(ap); }
void slurm_error(const char *f, ...) LOGF("error: ")
void slurm_info(const char *f, ...) LOGF("info: ")
void slurm_debug(const char *f, ...) { (void) f; }

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "expand")) {
		for (int i = 2; i < argc; i++) {
			char **v;
			int n;
			if (tt_expand_hostlist(argv[i], &v, &n) < 0) {
				printf("%s: invalid\n", argv[i]);
				continue;
			}
			printf("%s:", argv[i]);
			for (int k = 0; k < n; k++)
				printf(" %s", v[k]);
			printf("\n");
			tt_free_strv(v, n);
		}
		return 0;
	}
	if (argc >= 6 && !strcmp(argv[1], "run")) {
		char sockarg[4200];
		snprintf(sockarg, sizeof(sockarg), "socket=%s", argv[2]);
		env_nodelist = argv[3];
		env_self = argv[4];
		char *av[16] = { sockarg };
		int ac = 1;
		for (int i = 6; i < argc && ac < 16; i++)
			av[ac++] = argv[i];
		if (slurm_spank_init(NULL, ac, av) < 0)
			return 2;
		if (strcmp(argv[5], "-") && opt_cb(0, argv[5], 1) < 0) {
			printf("rc -1\n");
			return 0;
		}
		printf("rc %d\n", slurm_spank_user_init(NULL, ac, av));
		return 0;
	}
	fprintf(stderr, "usage: see the comment\n");
	return 2;
}

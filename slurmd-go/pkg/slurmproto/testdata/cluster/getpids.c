/*
 * getpids JOBID STEPID [NODELIST]: asks the slurmds of a step for its pids
 * (REQUEST_JOB_STEP_PIDS). No Slurm command sends that RPC (sstat -i reads
 * the pids from REQUEST_JOB_STEP_STAT); libslurm's slurm_job_step_get_pids
 * does.
 */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

int main(int argc, char **argv)
{
	slurm_step_id_t id = { .step_het_comp = NO_VAL };
	job_step_pids_response_msg_t *resp = NULL;
	int rc;

	if (argc < 3) {
		fprintf(stderr, "usage: getpids JOBID STEPID [NODELIST]\n");
		return 2;
	}
	id.job_id = strtoul(argv[1], NULL, 10);
	id.step_id = strtoul(argv[2], NULL, 10);
	slurm_init(NULL);
	rc = slurm_job_step_get_pids(&id, argc > 3 ? argv[3] : NULL, &resp);
	printf("slurm_job_step_get_pids: rc=%d %s\n", rc, rc ? slurm_strerror(errno) : "ok");
	return rc != 0;
}

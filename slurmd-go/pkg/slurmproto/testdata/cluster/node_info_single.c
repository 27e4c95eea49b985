/* Calls slurm_load_node_single for argv[1]: REQUEST_NODE_INFO_SINGLE. */
#include <stdio.h>
#include <slurm/slurm.h>
int main(int argc, char **argv) {
	node_info_msg_t *m = NULL;
	slurm_init(NULL);
	if (slurm_load_node_single(&m, argv[1], SHOW_ALL)) { slurm_perror("load"); return 1; }
	printf("%u records\n", m->record_count);
	for (unsigned i = 0; i < m->record_count; i++)
		printf("%s state=%u reason=%s gres=%s\n", m->node_array[i].name, m->node_array[i].node_state, m->node_array[i].reason, m->node_array[i].gres);
	return 0;
}

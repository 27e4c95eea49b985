/*
 * hello: the MPI program of TestMPI, built by the test with each MPI's mpicc.
 * Every rank says who and where it is, the ranks check an allreduce and time a
 * barrier. Arguments (for the failure cases): exit=R makes rank R exit 1 after
 * the barrier without MPI_Finalize; kill=R makes rank R kill itself with SIGKILL.
 * The other ranks then wait to be killed (srun -K), so that how the step ends does
 * not depend on whether they finished first.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank_arg(int argc, char **argv, const char *name)
{
	size_t n = strlen(name);
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], name, n) && argv[i][n] == '=')
			return atoi(argv[i] + n + 1);
	return -1;
}

int main(int argc, char **argv)
{
	int rank, size;
	long mine, sum, want;
	double t0, dt;
	const char *node = getenv("SLURMD_NODENAME");

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("hello from rank %d of %d on %s\n", rank, size, node ? node : "?");

	mine = rank + 1;
	want = (long)size * (size + 1) / 2;
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (sum != want) {
		fprintf(stderr, "rank %d: allreduce sum %ld, want %ld\n", rank, sum, want);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	t0 = MPI_Wtime();
	MPI_Barrier(MPI_COMM_WORLD);
	dt = MPI_Wtime() - t0;
	if (rank == 0) {
		printf("allreduce sum %ld of %d ranks ok\n", sum, size);
		/* On stderr: a time differs from run to run, the test only parses it. */
		fprintf(stderr, "barrier took %.6f s\n", dt);
	}
	fflush(stdout);
	fflush(stderr);
	/*
	 * Every rank's lines are out before one fails: Open MPI 5 aborts the
	 * others as soon as it hears of a rank's exit, buffered output lost.
	 */
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == rank_arg(argc, argv, "exit"))
		exit(1);
	if (rank == rank_arg(argc, argv, "kill"))
		kill(getpid(), SIGKILL);
	if (rank_arg(argc, argv, "exit") >= 0 || rank_arg(argc, argv, "kill") >= 0)
		for (;;)
			pause();
	MPI_Finalize();
	return 0;
}

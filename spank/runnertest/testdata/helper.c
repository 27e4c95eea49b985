/* Test "helper": reports its credentials, cwd and env on fd 4, reads an
 * exit code (or "sleep") from fd 3, the config pipe. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
	char buf[64] = { 0 };
	ssize_t n = read(3, buf, sizeof(buf) - 1);
	uid_t r, e, s;
	gid_t gr, ge, gs;
	char cwd[512];
	FILE *f = fdopen(4, "w");
	if (!f)
		return 99;
	getresuid(&r, &e, &s);
	getresgid(&gr, &ge, &gs);
	fprintf(f, "uid=%d,%d,%d gid=%d,%d,%d cwd=%s argc=%d argv=%s,%s,%s\n",
		r, e, s, gr, ge, gs, getcwd(cwd, sizeof(cwd)) ? cwd : "?", argc,
		argv[0], argc > 1 ? argv[1] : "", argc > 2 ? argv[2] : "");
	for (char **ep = environ; *ep; ep++)
		fprintf(f, "env %s\n", *ep);
	fclose(f);
	if (n > 0 && strncmp(buf, "sleep", 5) == 0)
		sleep(100);
	return n > 0 ? atoi(buf) : 42;
}

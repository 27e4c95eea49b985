/*
 * cudaload: a small CUDA load for bench/gpu/device-check.sh. It needs no
 * CUDA headers or toolkit: libcuda.so.1 (the driver) is opened at run time.
 * It allocates MIB MiB on device 0 and fills it with cuMemsetD8 for SECONDS
 * seconds, printing "cudaload: ready pid=<pid>" once the memory is held.
 *
 * usage: cudaload [MIB] [SECONDS]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

#define LOAD(name, sym)                                                        \
	do {                                                                   \
		*(void **)(&name) = dlsym(lib, sym);                           \
		if (!name) {                                                   \
			fprintf(stderr, "cudaload: no %s in libcuda\n", sym);  \
			return 2;                                              \
		}                                                              \
	} while (0)

#define CHECK(call)                                                            \
	do {                                                                   \
		CUresult rc_ = (call);                                         \
		if (rc_ != 0) {                                                \
			fprintf(stderr, "cudaload: %s = %d\n", #call, rc_);    \
			return 3;                                              \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 4096;
	int seconds = argc > 2 ? atoi(argv[2]) : 20;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemFree)(CUdeviceptr);
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr buf;
	time_t end;
	unsigned long rounds = 0;

	if (!lib) {
		fprintf(stderr, "cudaload: %s\n", dlerror());
		return 2;
	}
	LOAD(cuInit, "cuInit");
	LOAD(cuDeviceGet, "cuDeviceGet");
	LOAD(cuCtxCreate, "cuCtxCreate_v2");
	LOAD(cuMemAlloc, "cuMemAlloc_v2");
	LOAD(cuMemsetD8, "cuMemsetD8_v2");
	LOAD(cuCtxSynchronize, "cuCtxSynchronize");
	LOAD(cuMemFree, "cuMemFree_v2");
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuCtxCreate(&ctx, 0, dev));
	CHECK(cuMemAlloc(&buf, mib << 20));
	CHECK(cuMemsetD8(buf, 0, mib << 20));
	CHECK(cuCtxSynchronize());
	printf("cudaload: ready pid=%d mib=%zu\n", (int)getpid(), mib);
	fflush(stdout);
	for (end = time(NULL) + seconds; time(NULL) < end; rounds++) {
		CHECK(cuMemsetD8(buf, (unsigned char)rounds, mib << 20));
		CHECK(cuCtxSynchronize());
	}
	CHECK(cuMemFree(buf));
	printf("cudaload: done rounds=%lu\n", rounds);
	return 0;
}

# TiEE: slurmd-go, a drop-in replacement for Slurm 22.05's slurmd.
SHELL := /bin/bash
GO ?= go
BIN := bin/slurmd-go
STEPD := bin/slurmstepd-go
# The OpenPMIx server helper of srun --mpi=pmix steps (slurmd-go/pmixhelper), C
# against Debian's libpmix-dev; the step manager finds it beside itself.
PMIX_HELPER := bin/slurmd-go-pmix
# slurmd-go with go-nvml's 8 x H100 mock as its NVML (-tags nvmlmock): real-cluster
# GPU tests on GPU-less hosts only, never deployed (slurmd-go/internal/gpu/doc.go).
NVMLMOCK := bin/slurmd-go-nvmlmock
CC ?= cc
PKGS := ./...
FUZZTIME ?= 10s
# Every real-cluster test runs as root against Debian's slurmctld and munged.
INTEGRATION_TIMEOUT ?= 25m
# The real-cluster runs, RELEASE/AUTH/TESTS (scripts/integration.sh): the host's 22.05
# and the 24.11 chroot with every test, the 26.05 chroot with the registration,
# batch, srun, restart and bad-input tests, once with munge and once with auth/slurm.
INTEGRATION_RUNS ?= 22.05/munge/all 24.11/munge/all 26.05/munge/subset 26.05/slurm/subset

BENCH_BIN := bin/bench

.PHONY: help build image k8s-test manifests nvmlmock gpu-kit deps chroots test unit integration integration-stock interop fuzz lint demo demo-stop clean bench bench-2205 bench-2411 bench-smoke bench-zones

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/slurmd-go, its step manager bin/slurmstepd-go, the SPANK host bin/spank-runner and (with libpmix-dev) the PMIx helper bin/slurmd-go-pmix
	$(GO) build -o $(BIN) ./slurmd-go/cmd/slurmd
	$(GO) build -o $(STEPD) ./slurmd-go/cmd/slurmstepd
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -rdynamic -o bin/spank-runner spank/runner/*.c -ldl
	@if pkg-config --exists pmix 2>/dev/null; then \
		echo "$(CC) -o $(PMIX_HELPER) slurmd-go/pmixhelper/pmixhelper.c (libpmix $$(pkg-config --modversion pmix))"; \
		$(CC) -O2 -Wall -Wextra -Werror -o $(PMIX_HELPER) slurmd-go/pmixhelper/pmixhelper.c $$(pkg-config --cflags --libs pmix) -lpthread; \
	else \
		echo "make build: libpmix-dev is not installed (scripts/install-deps.sh): $(PMIX_HELPER) not built, srun --mpi=pmix steps will fail"; \
	fi

.PHONY: spank-plugin
spank-plugin: ## build the tiee_topology SPANK plugin bin/tiee_topology.so (spank/topology) against /usr/include's <slurm/spank.h>
	@mkdir -p bin
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -shared -fPIC -I/usr/include -o bin/tiee_topology.so spank/topology/tiee_topology.c

image: build ## write the slurmd-go image, bin/slurmd-go-image.tar (docker-archive; `ctr -n k8s.io images import` loads it), offline
	$(GO) build -o bin/mkimage ./k8s/cmd/mkimage
	bin/mkimage slurmd-go -bin bin -o bin/slurmd-go-image.tar

manifests: ## render k8s/manifests/slurmd-go.yaml from the chart (defaults, slurm.conf from ConfigMap slurm-conf, namespace slurm) for `kubectl apply -k k8s/manifests`; needs bin/k8s/helm (k8s/realcluster/build.sh)
	bin/k8s/helm template slurmd-go k8s/chart -n slurm --set config.configMap=slurm-conf > k8s/manifests/slurmd-go.yaml

k8s-test: image ## the chart on a real Kubernetes beside a real slurmctld (k8s/realcluster; builds Kubernetes once, ~10 min); log bin/logs/k8s-e2e.log
	CGO_ENABLED=0 $(GO) build -o bin/pause ./k8s/cmd/pause
	GO=$(GO) k8s/realcluster/test.sh

nvmlmock: ## build bin/slurmd-go-nvmlmock: slurmd-go whose NVML is go-nvml's dgxh100 mock (8 x H100), for GPU tests on GPU-less hosts; never deploy it
	$(GO) build -tags nvmlmock -o $(NVMLMOCK) ./slurmd-go/cmd/slurmd

gpu-kit: build ## build bin/gpukit for bench/gpu/device-check.sh (run on a GPU machine, nothing built there): slurmd-go, the real-NVML test, cudaload
	mkdir -p bin/gpukit
	cp $(BIN) $(STEPD) bin/gpukit/
	$(GO) test -c -tags nvmlreal -o bin/gpukit/gpu-real.test ./slurmd-go/internal/gpu/
	$(CC) -O2 -Wall -Wextra -Werror -o bin/gpukit/cudaload bench/gpu/cudaload.c -ldl

deps: ## install the Debian packages (slurmctld, slurmd, slurm-client, munge, libmunge-dev, ...), start munged, build and mount the 24.11 and 26.05 chroots
	scripts/install-deps.sh
	scripts/ensure-munged.sh
	scripts/chroots.sh 24.11 26.05

chroots: ## build (once) and mount the Slurm 24.11 chroot the 24.11 bench runs in (scripts/chroots.sh)
	scripts/chroots.sh 24.11 >/dev/null

unit: ## unit tests, race detector on
	$(GO) test -race -count=1 $(PKGS)

integration: build nvmlmock ## real-cluster tests: slurmctld + slurmd-go nodes of each release in INTEGRATION_RUNS; logs in bin/logs/integration-RELEASE-AUTH.log
	GO=$(GO) INTEGRATION_TIMEOUT=$(INTEGRATION_TIMEOUT) scripts/integration.sh go $(INTEGRATION_RUNS)

integration-stock: ## the same real-cluster runs against each release's stock slurmd, the reference; logs in bin/logs/integration-stock-RELEASE-AUTH.log
	GO=$(GO) INTEGRATION_TIMEOUT=$(INTEGRATION_TIMEOUT) scripts/integration.sh stock $(INTEGRATION_RUNS)

interop: deps ## the real 24.11 and 26.05 daemons and libslurm take our auth/slurm tokens and SACK socket, answer bad tokens as recorded, and read slurm.conf as pkg/slurmconf does
	$(GO) test -tags integration -count=1 -v -run Interop ./slurmd-go/pkg/auth/authslurm/
	$(GO) test -tags integration -count=1 -v -run TestOracle ./slurmd-go/pkg/slurmconf/

fuzz: ## run every fuzz target briefly (FUZZTIME each) on its committed corpus
	scripts/fuzz.sh $(FUZZTIME)

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) vet -tags integration ./...

test: deps lint unit fuzz interop integration k8s-test bench-smoke ## every test, the real-cluster ones included (k8s-test: the chart on a real Kubernetes)

# Each stack (Slurm release / auth type) writes its own results directory and RFC blocks.
BENCH_2205 := -out bench/results/latest
BENCH_2411 := -release 24.11 -auth slurm -out bench/results/latest-24.11-slurm

bench: ## the full bench on 22.05/munge, then 24.11/auth-slurm, then the zone bench (~30 min, root): stock slurmd vs slurmd-go vs limit servers; writes bench/results/latest{,-24.11-slurm,zones} and the RFC's generated blocks
	$(MAKE) bench-2205
	$(MAKE) bench-2411
	$(MAKE) bench-zones
	$(BENCH_BIN)/benchreport -dir bench/results/latest -dir bench/results/latest-24.11-slurm -rfc rfc

bench-2205: deps build ## the full bench on the host's Slurm 22.05 with munge (~11 min): bench/results/latest
	$(GO) build -o $(BENCH_BIN)/ ./bench/cmd/...
	$(BENCH_BIN)/benchrun -profile full -slurmd-go $(BIN) $(BENCH_2205) -rfc rfc -wait-idle 2m

bench-2411: deps build chroots ## the full bench on Slurm 24.11 with auth/slurm, in its chroot (~12 min): bench/results/latest-24.11-slurm
	$(GO) build -o $(BENCH_BIN)/ ./bench/cmd/...
	$(BENCH_BIN)/benchrun -profile full -slurmd-go $(BIN) $(BENCH_2411) -rfc rfc -wait-idle 2m

bench-smoke: deps build chroots ## two ~1 min benches, 22.05/munge then 24.11/auth-slurm: every scenario tiny, then the zone bench tiny (~1 min); fails on a failed scenario, missing numbers or a protocol error (never on speed)
	$(GO) build -o $(BENCH_BIN)/ ./bench/cmd/...
	$(BENCH_BIN)/benchrun -profile smoke -slurmd-go $(BIN) -out bench/results/smoke -check
	$(BENCH_BIN)/benchrun -profile smoke -slurmd-go $(BIN) -release 24.11 -auth slurm -out bench/results/smoke-24.11-slurm -check
	$(GO) test -tags integration -count=1 -v -timeout 15m -run '^TestZoneBench$$' ./bench/zones/ -args -profile smoke

# The zone bench runs on the integration harness's simulated zones (network namespaces on the
# host's 22.05), so it is a test binary; it fails only on a job that did not run or fail as
# its case requires, never on a time.
bench-zones: deps build ## the zone bench (issue 15, ~6 min, root, host's 22.05): ring all-reduce step time in one simulated zone vs across two per cross-zone delay, and a hard-blocked job with and without tiee_topology; writes bench/results/zones and the RFC's zones block
	$(GO) test -tags integration -count=1 -v -timeout 40m -run '^TestZoneBench$$' ./bench/zones/ -args -profile full -rfc rfc

# make demo SLURM=24.11 (or 26.05) runs the demo in that release's chroot; AUTH=slurm
# uses auth/slurm instead of munge (24.11 and 26.05).
SLURM ?= 22.05
AUTH ?= munge

demo: deps build ## start a local cluster of slurmd-go nodes under a real slurmctld and show it (SLURM=22.05|24.11|26.05, AUTH=munge|slurm)
	SLURM=$(SLURM) AUTH=$(AUTH) scripts/demo.sh

demo-stop: ## stop the demo cluster
	scripts/demo.sh stop

clean:
	rm -rf bin

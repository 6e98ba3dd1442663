# rpcxbatch make targets. `make test` is what CI runs.
GO ?= go
# Packages whose goroutines share state: always run under the race detector.
# reliability/ too: its 50,000-goroutine tests stay within the detector's
# limits (they use Go calls, not a goroutine per call, where it matters).
RACE_DIRS = codec batchserver batchclient group selector plugin internal/fastcodec internal/idlemem internal/plainconn reliability lock
RACE_PKGS = $(foreach d,$(RACE_DIRS),$(if $(wildcard $(d)/*.go),./$(d)/...))

.PHONY: test vet modcheck race unit mutate explore bench example group-example cluster-example fuzz fuzz-long soak perf perf-quick rpcxbench-demo fmt-check locks-example locks-bench locks-bench-quick locks-partition

# The etcd integration tests (./registry/) and cluster-example need the etcd
# binary; each starts its own throwaway etcd on free loopback ports.
ETCD_HINT = apt-get install -y etcd-server (Debian/Ubuntu)

test: fmt-check vet modcheck race

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@# A build output committed by mistake (go build ./example/... or
	@# ./perf/locks at the root) would ride in every clone: refuse it.
	@bin=$$(git ls-files 2>/dev/null | while read -r f; do 		[ -f "$$f" ] && [ "$$(head -c4 "$$f" | od -An -c | tr -d ' ')" = '177ELF' ] && echo "$$f"; done); 	if [ -n "$$bin" ]; then echo "executables tracked by git (git rm --cached them, add them to .gitignore):"; echo "$$bin"; exit 1; fi

vet:
	$(GO) vet ./...
	@# Every planted fault (make mutate) must still find its line: a fault
	@# whose line the code no longer has tests nothing.
	$(GO) run ./internal/testkit/mutate -list > /dev/null || $(GO) run ./internal/testkit/mutate -list

# The etcd tests run verbose, so that the log names each one that ran (or
# says why it was skipped).
race:
	@command -v etcd >/dev/null 2>&1 || echo "NOTE: no etcd binary on PATH ($(ETCD_HINT)): the etcd integration tests in ./registry/ will be skipped (with CI=true they fail)"
	$(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)
	# The rolling restart's plain-rpcx reference, left out under -race
	# (rpcx's own XClient races in removeClient).
	$(GO) test -count=1 -timeout 5m -run '^TestRollingRestart$$' ./reliability/
	# The plain-rpcx references of the push-ownership tests, left out under
	# -race likewise (rpcx's removeClient races with its Client.input).
	$(GO) test -count=1 -timeout 5m -run '^TestPush(RemovedOldClientKeepsNewClientsPushes|StaleUnregisterKeepsNewerClientsChannel)$$' ./batchclient/
	# The plain-rpcx reference of the cancelled plain call, likewise (rpcx's
	# Client.call reads the sequence number its send goroutine writes).
	$(GO) test -count=1 -timeout 5m -run '^TestPlainFallbackCallEndedByContextLeavesReplyAlone$$' ./batchclient/
	# The plain-rpcx reference of arguments the codec cannot encode,
	# likewise (rpcx's removeClient races with its Client.input).
	$(GO) test -count=1 -timeout 5m -run '^TestXClientCompareUnencodableArgs$$' ./batchclient/
	# The retry storm's rates and pauses, which the race detector's cost
	# would measure (under -race the storm runs for its data races only).
	$(GO) test -count=1 -timeout 5m -run '^TestRetryStormKeepsFramesFlowing$$' ./reliability/
	# The fleet's costs (batchclient/fleet_test.go), which measure memory
	# and connections: the race detector's shadow memory would measure
	# itself, so they build without it.
	$(GO) test -count=1 -timeout 5m -v -run '^(TestFanInLightClientsCostWhatPlainCosts|TestFanOutIdlePeersKeepOneLane|TestIdleLaneCostsServerWhatPlainCosts|TestBurstGrowsLanes)$$' ./batchclient/
	$(GO) test -race -count=1 -timeout 5m -v ./registry/
	# Each directory and what is under it, anchored: /lock must not take
	# perf/locks along. internal/explore is among them: the explorer's
	# fixed seeds, without -race (rpcx's own Broadcast races on its error).
	$(GO) test -count=1 -timeout 10m $$($(GO) list ./... | grep -v $(foreach d,$(RACE_DIRS) registry,-e '/$(d)$$' -e '/$(d)/'))

unit:
	$(GO) test -count=1 ./...

# The differential explorer (internal/explore) over SEEDS scenarios from
# seed FROM: each runs on plain rpcx and on the drop-in, and a difference
# not in its accepted list fails with the seed and the command that
# replays it. `make test` runs its fixed seeds (1 to 100).
SEEDS ?= 500
FROM ?= 1
explore:
	EXPLORE_SEEDS=$(SEEDS) EXPLORE_FROM=$(FROM) $(GO) test -count=1 -timeout 90m -v -run '^TestExplore$$' ./internal/explore/

# The fast tier, to run after each change; make test stays the full suite
# CI runs. gofmt, go vet and the planted faults' lines (fmt-check, vet),
# then the unit tests without the race detector and without the long
# ones: the packages in CHECK_EXCLUDE (reliability/: the fault, overload
# and restart suites; registry/: etcd processes; internal/explore: the
# differential explorer, about 2 minutes) and the tests in
# CHECK_SKIP (fleets of clients, child processes killed, frozen or
# partitioned, and the longest differential test). A long test added
# elsewhere belongs in CHECK_SKIP. The tests mostly wait (for timers,
# peers, deadlines), so three packages run at once on two cores.
CHECK_P ?= 3
CHECK_EXCLUDE = reliability registry internal/explore
CHECK_SKIP = ^(TestFanInLightClientsCostWhatPlainCosts|TestFanOutIdlePeersKeepOneLane|TestIdleLaneCostsServerWhatPlainCosts|TestBurstGrowsLanes|TestFault.*|TestStarvedClientKeepsHealthyPeer|TestMachinePauseKeepsHealthyPeer|TestBlockedCallersStayWithinQueueBytes|TestXClientCompareFailModes|TestXClientCompareHungServer|TestXClientComparePartitionDeadlines|TestKeyedSendsKeepOrderBesideCasts|TestPoolSlowHandlersKeepLanes|TestBusyPoolNewClientConnectsLikeRPCX|TestPartitionFencing|TestProcess.*)$$
.PHONY: check
check: fmt-check vet
	$(GO) test -count=1 -p $(CHECK_P) -timeout 5m -skip '$(CHECK_SKIP)' $$($(GO) list ./... | grep -v $(foreach d,$(CHECK_EXCLUDE),-e '/$(d)$$' -e '/$(d)/'))

# Plants deliberate faults, one at a time, in scratch copies of the tree
# and runs the tests of the packages concerned: every fault must make a
# test fail (see internal/testkit/mutate for the list). MUTATE=regexp picks faults.
MUTATE ?=
mutate:
	$(GO) run ./internal/testkit/mutate -run '$(MUTATE)'

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./batchclient/ ./group/

example:
	$(GO) run ./example/quickstart

group-example:
	$(GO) run ./example/group

# Two lock nodes on loopback: a contended counter, a deadlock, a dead holder.
locks-example:
	$(GO) run ./example/locks

# lock/'s partition test (TestPartitionFencing, 3 cuts, in make test) in
# its long mode: 12 cuts of three lock node processes, about a minute.
locks-partition:
	RPCXBATCH_PARTITION_LONG=1 $(GO) test -count=1 -timeout 5m -v -run '^TestPartitionFencing$$' ./lock/

# elock's benchmark designs 1, 3 and 4 on two lock node processes on
# loopback: package lock over rpcxbatch and over plain rpcx side by side,
# and etcd's concurrency.Mutex for design 1 (needs the etcd binary).
# Results: perf/results/locks-<preset>.json and perf/results/locks-<preset>/.
locks-bench:
	@command -v etcd >/dev/null 2>&1 || { echo "locks-bench runs etcd's mutex too and needs the etcd binary on PATH: $(ETCD_HINT) (or run go run ./perf/locks -etcd-clients '')"; exit 1; }
	$(GO) run ./perf/locks -preset full

# The same at 1,000 clients per node and short points: about a minute.
locks-bench-quick:
	@command -v etcd >/dev/null 2>&1 || { echo "locks-bench-quick needs the etcd binary on PATH: $(ETCD_HINT)"; exit 1; }
	$(GO) run ./perf/locks -preset quick

# Three servers and a client through a throwaway etcd on loopback.
cluster-example:
	@command -v etcd >/dev/null 2>&1 || { echo "cluster-example needs the etcd binary on PATH: $(ETCD_HINT)"; exit 1; }
	$(GO) run ./example/cluster

# A short fuzz of every decoder; FUZZTIME sets the executions per target.
# A count, not a duration: with a duration Go 1.26's fuzzing coordinator
# can fail a target with a bare "context deadline exceeded" as the time
# runs out on a busy machine (go.dev/issue/75804, fixed in Go 1.27). About
# 16,000 executions a second on 2 cores: 200000x is ~12 s a target.
FUZZTIME ?= 200000x
fuzz-long:
	$(MAKE) fuzz FUZZTIME=2000000x

# The reliability suite's long forms: 1,000,000 integrity calls and the rest.
soak:
	RPCXBATCH_SOAK=1 $(GO) test -count=1 -timeout 60m -v -run . ./reliability/

# Side-by-side harness, server in its own process: four paths at every point,
# plain rpcx's Client and XClient, rpcxbatch's Client and drop-in XClient
# (PERF_FLAGS="-paths dropin,batch" narrows them).
# PERF_FLAGS adds flags, e.g. PERF_FLAGS="-repeat 3" for each path's
# median of three interleaved runs (go run ./perf -h lists them).
PERF_FLAGS ?=
perf-quick:
	$(GO) run ./perf -preset quick $(PERF_FLAGS)

perf:
	$(GO) run ./perf -preset full $(PERF_FLAGS)

# rpcxbench (cmd/rpcxbench, the tool users point at their own service)
# against its demo service on loopback, with the plugin: the table, and
# perf/results/rpcxbench/demo.jsonl and demo.svg. RPCXBENCH_FLAGS sets the
# load (-c, -d, -n, -rounds; go run ./cmd/rpcxbench -h).
RPCXBENCH_FLAGS ?= -c 1,10,100,1000,10000 -d 10s
rpcxbench-demo:
	@d=$$(mktemp -d) && $(GO) build -o $$d/demoserver ./cmd/rpcxbench/demoserver && \
	{ $$d/demoserver -plugin -stdin=false > $$d/ready & pid=$$!; trap 'kill $$pid; rm -rf $$d' EXIT; } && \
	for i in $$(seq 100); do grep -q READY $$d/ready && break; sleep 0.1; done && \
	mkdir -p perf/results/rpcxbench && \
	$(GO) run ./cmd/rpcxbench -addr $$(awk '{print $$2}' $$d/ready) -call Shop.Order \
		-args '{"Item": "tea", "Qty": 3, "Price": 2.5, "Tags": ["green", "loose"]}' \
		-json perf/results/rpcxbench/demo.jsonl -figure perf/results/rpcxbench/demo.svg $(RPCXBENCH_FLAGS)

fuzz:
	@for t in codec:FuzzDecodeBatch codec:FuzzDecodeReplies codec:FuzzDecodeHandshake codec:FuzzDecodeCredit codec:FuzzDecodeCreditBytes \
		codec:FuzzReadMessage internal/fastcodec:FuzzPlanDecode internal/fastcodec:FuzzDifferential; do \
		$(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# A user's module that imports the public packages keeps its go line (this
# module asks for no newer Go than rpcx v1.9.4 does) and builds.
modcheck:
	@d=$$(mktemp -d); trap 'rm -rf "$$d"' EXIT; \
	printf 'module example.com/user\n\ngo 1.26.0\n\nrequire github.com/rpcxbatch/rpcxbatch v0.0.0\n\nreplace github.com/rpcxbatch/rpcxbatch => %s\n' "$(CURDIR)" > "$$d/go.mod"; \
	printf 'package main\n\nimport (\n\t_ "github.com/rpcxbatch/rpcxbatch/batchclient"\n\t_ "github.com/rpcxbatch/rpcxbatch/batchserver"\n)\n\nfunc main() {}\n' > "$$d/main.go"; \
	cd "$$d" && GOFLAGS=-mod=mod $(GO) mod tidy && $(GO) build ./... && \
	{ grep -qx 'go 1.26.0' go.mod || { echo "modcheck: go mod tidy raised a user's go line:"; cat go.mod; exit 1; }; } && \
	echo "modcheck: a module importing batchclient and batchserver keeps go 1.26.0 and builds"

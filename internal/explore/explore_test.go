package explore

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// ciSeeds is how many seeds `go test` runs (1..ciSeeds): what CI runs.
// `make explore SEEDS=N` (EXPLORE_SEEDS=N) runs 1..N instead (from
// EXPLORE_FROM when set), EXPLORE_SEED=a,b,... exactly those.
const ciSeeds = 100

// defaultParallel is how many scenarios run at once.
const defaultParallel = 4

// defaultTries is how many times a scenario runs before a difference
// that no entry accepts fails it: a difference that comes and goes with
// the machine's load is logged, not failed. EXPLORE_TRIES changes it.
const defaultTries = 3

func TestMain(m *testing.M) {
	// rpcx logs every handler error and panic; the outcomes say what
	// matters.
	log.SetDummyLogger()
	os.Exit(m.Run())
}

// seeds are the seeds to run, and whether they are exactly the CI set.
func seeds(t *testing.T) ([]uint64, bool) {
	if s := os.Getenv("EXPLORE_SEED"); s != "" {
		var out []uint64
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("EXPLORE_SEED=%q: %v", s, err)
			}
			out = append(out, n)
		}
		return out, false
	}
	n, from := ciSeeds, 1
	if s := os.Getenv("EXPLORE_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("EXPLORE_SEEDS=%q: want a count above 0", s)
		}
		n = v
	}
	if s := os.Getenv("EXPLORE_FROM"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			t.Fatalf("EXPLORE_FROM=%q: want a seed", s)
		}
		from = v
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out, n == ciSeeds && from == 1
}

func replayCommand(seed uint64) string {
	return fmt.Sprintf("EXPLORE_SEED=%d go test -count=1 -v -run '^TestExplore$' ./internal/explore/", seed)
}

// TestExplore runs each seed's scenario on plain rpcx and on the drop-in
// and fails on a difference the accepted list does not explain; over the
// CI seeds it also fails on an accepted entry that explained nothing
// (stale: its difference is gone, delete the entry and its docs row).
// EXPLORE_STALE=ignore skips that check. The scenarios run parallel
// (EXPLORE_PARALLEL of them at once, 4 by default: they mostly wait), then
// each seed reports in a subtest of its own.
func TestExplore(t *testing.T) {
	list, ci := seeds(t)
	tries := envCount(t, "EXPLORE_TRIES", defaultTries)
	parallel := envCount(t, "EXPLORE_PARALLEL", defaultParallel)
	// EXPLORE_DUMP=file writes every difference found, accepted or not,
	// one JSON object a line: for looking at many seeds' findings at once.
	var dump *json.Encoder
	var dumpMu sync.Mutex
	if p := os.Getenv("EXPLORE_DUMP"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dump = json.NewEncoder(f)
	}
	var matchedMu sync.Mutex
	matched := make([]int, len(accepted))
	credit := func(used []int) {
		matchedMu.Lock()
		for _, i := range used {
			matched[i]++
		}
		matchedMu.Unlock()
	}
	start := time.Now()

	for _, d := range processDiffs() {
		if used, ok := explain(nil, d); ok {
			credit(used)
		} else {
			t.Errorf("process-wide difference no accepted entry explains:\n\t%s", d)
		}
	}

	results := make([]seedResult, len(list))
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for k, seed := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &results[k]
			r.sc = generate(seed)
			began := time.Now()
			defer func() { r.took = time.Since(began) }()
			for try := 1; try <= tries; try++ {
				diffs, err := runScenario(r.sc)
				if err != nil {
					r.err = err
					return
				}
				r.unmatched = r.unmatched[:0]
				for _, d := range diffs {
					used, ok := explain(r.sc, d)
					if dump != nil && try == 1 {
						var ids []string
						for _, i := range used {
							ids = append(ids, accepted[i].ID)
						}
						dumpMu.Lock()
						dump.Encode(map[string]any{"seed": seed, "scenario": r.sc.String(), "diff": d, "accepted": strings.Join(ids, ",")})
						dumpMu.Unlock()
					}
					if !ok {
						r.unmatched = append(r.unmatched, d)
					} else if try == 1 {
						credit(used)
					}
				}
				if len(r.unmatched) == 0 {
					return
				}
				if try < tries {
					r.logs = append(r.logs, diffList(r.unmatched))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	ran := 0
	for k, seed := range list {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ran++
			r := results[k]
			final := diffList(r.unmatched)
			for try, l := range r.logs {
				if l != final {
					t.Logf("%s\ntry %d: differences no entry explains, not in the last try:%s", r.sc, try+1, l)
				}
			}
			switch {
			case r.err != nil:
				t.Errorf("%s: %v\nreplay alone: %s", r.sc, r.err, replayCommand(seed))
			case len(r.unmatched) > 0:
				t.Errorf("%s\ndifferences no accepted entry explains, in %d runs of %d:%s\nreplay alone: %s", r.sc, tries, tries, diffList(r.unmatched), replayCommand(seed))
			}
		})
	}
	t.Logf("%d scenarios in %s, %d at once", len(list), elapsed.Round(time.Millisecond), parallel)
	slowest := make([]int, len(list))
	for k := range slowest {
		slowest[k] = k
	}
	sort.Slice(slowest, func(i, j int) bool { return results[slowest[i]].took > results[slowest[j]].took })
	for _, k := range slowest[:min(5, len(slowest))] {
		t.Logf("slowest: %s in %s", results[k].sc, results[k].took.Round(time.Millisecond))
	}
	for i, a := range accepted {
		t.Logf("accepted %-32s item %-4s explained %d", a.ID, a.Item, matched[i])
	}
	if !ci || ran != len(list) || os.Getenv("EXPLORE_STALE") == "ignore" {
		return
	}
	for i, a := range accepted {
		if matched[i] == 0 {
			t.Errorf("accepted entry %q (item %s) explained no difference over the CI seeds: its difference is gone; delete it from accepted_test.go and its row from docs/compatibility.md's %q", a.ID, a.Item, docSection)
		}
	}
}

// seedResult is what a seed's scenario came to.
type seedResult struct {
	sc        *Scenario
	unmatched []Diff   // of the last try
	logs      []string // the earlier tries' unexplained differences
	err       error
	took      time.Duration
}

func diffList(ds []Diff) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("\n\t" + d.String())
	}
	return b.String()
}

func envCount(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a count above 0", name, s)
	}
	return v
}

// clientErrorFuncMu keeps the scenarios that set rpcx's process-wide
// client.ClientErrorFunc (which hold it) apart from all others (which
// read-hold it).
var clientErrorFuncMu sync.RWMutex

// runScenario runs sc on both sides and compares them. With
// EXPLORE_VERBOSE=1 it prints both outcomes whole.
func runScenario(sc *Scenario) ([]Diff, error) {
	if sc.ClientErrorFunc {
		clientErrorFuncMu.Lock()
		defer clientErrorFuncMu.Unlock()
	} else {
		clientErrorFuncMu.RLock()
		defer clientErrorFuncMu.RUnlock()
	}
	plain, err := runSide(sc, false)
	if err != nil {
		return nil, fmt.Errorf("plain side: %w", err)
	}
	batch, err := runSide(sc, true)
	if err != nil {
		return nil, fmt.Errorf("batch side: %w", err)
	}
	if os.Getenv("EXPLORE_VERBOSE") == "1" {
		fmt.Printf("%s\nplain:\n%s\nbatch:\n%s\n", sc, plain, batch)
	}
	return compare(sc, plain, batch), nil
}

// processDiffs are the differences in rpcx's process-wide settings that
// setting up a server makes: plain rpcx changes none; the plugin must not
// either. rpcx's protocol.MaxMessageLength is put back afterwards, so
// that the scenarios run under the user's setting. The plugin may change
// a setting once per process: the first answer is kept for every run of
// TestExplore (-count).
var processDiffs = sync.OnceValue(func() []Diff {
	before := protocol.MaxMessageLength
	s := server.NewServer()
	_, err := batchserver.New(s)
	after := protocol.MaxMessageLength
	protocol.MaxMessageLength = before
	s.Close()
	var out []Diff
	if err != nil {
		out = append(out, Diff{Phase: "process", Where: "batchserver.New", Plain: "nil", Batch: err.Error()})
	}
	if after != before {
		out = append(out, Diff{Phase: "process", Where: "protocol.MaxMessageLength", Plain: fmt.Sprint(before), Batch: fmt.Sprint(after)})
	}
	return out
})

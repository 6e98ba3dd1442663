package explore

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
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
// and fails on a difference the accepted list does not name; over the CI
// seeds it also fails on an accepted entry that matched nothing (stale:
// its difference is gone, delete the entry and its docs row).
// EXPLORE_STALE=ignore skips that check.
func TestExplore(t *testing.T) {
	list, ci := seeds(t)
	tries := defaultTries
	if s := os.Getenv("EXPLORE_TRIES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("EXPLORE_TRIES=%q: want a count above 0", s)
		}
		tries = v
	}
	// EXPLORE_DUMP=file writes every difference found, accepted or not,
	// one JSON object a line: for looking at many seeds' findings at once.
	var dump *json.Encoder
	if p := os.Getenv("EXPLORE_DUMP"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dump = json.NewEncoder(f)
	}
	matched := make([]int, len(accepted))
	ran := 0
	start := time.Now()

	for _, d := range processDiffs() {
		if used, ok := explain(nil, d); ok {
			for _, i := range used {
				matched[i]++
			}
		} else {
			t.Errorf("process-wide difference no accepted entry names:\n\t%s", d)
		}
	}

	for _, seed := range list {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ran++
			sc := generate(seed)
			var unmatched []Diff
			for try := 1; try <= tries; try++ {
				diffs, err := runScenario(t, sc)
				if err != nil {
					t.Fatalf("%s: %v\nreplay: %s", sc, err, replayCommand(seed))
				}
				unmatched = unmatched[:0]
				for _, d := range diffs {
					used, ok := explain(sc, d)
					if dump != nil && try == 1 {
						var ids []string
						for _, i := range used {
							ids = append(ids, accepted[i].ID)
						}
						dump.Encode(map[string]any{"seed": seed, "scenario": sc.String(), "diff": d, "accepted": strings.Join(ids, ",")})
					}
					if ok {
						if try == 1 {
							for _, i := range used {
								matched[i]++
							}
						}
						continue
					}
					unmatched = append(unmatched, d)
				}
				if len(unmatched) == 0 {
					return
				}
				if try < tries {
					var b strings.Builder
					for _, d := range unmatched {
						b.WriteString("\n\t" + d.String())
					}
					t.Logf("try %d of %s: differences no entry accepts (trying again):%s", try, sc, b.String())
				}
			}
			var b strings.Builder
			for _, d := range unmatched {
				b.WriteString("\n\t" + d.String())
			}
			t.Errorf("%s\ndifferences no accepted entry names, in %d runs of %d:%s\nreplay alone: %s", sc, tries, tries, b.String(), replayCommand(seed))
		})
	}
	t.Logf("%d scenarios in %s", ran, time.Since(start).Round(time.Millisecond))
	for i, a := range accepted {
		t.Logf("accepted %-40s matched %d", a.ID, matched[i])
	}
	if !ci || ran != len(list) || os.Getenv("EXPLORE_STALE") == "ignore" {
		return
	}
	for i, a := range accepted {
		if matched[i] == 0 {
			t.Errorf("accepted entry %q (item %s) matched no difference over the CI seeds: its difference is gone; delete it from accepted_test.go and its row from docs/compatibility.md's \"What differs\"", a.ID, a.Item)
		}
	}
}

// runScenario runs sc on both sides and compares them. With
// EXPLORE_VERBOSE=1 it logs both outcomes whole.
func runScenario(t *testing.T, sc *Scenario) ([]Diff, error) {
	plain, err := runSide(sc, false)
	if err != nil {
		return nil, fmt.Errorf("plain side: %w", err)
	}
	batch, err := runSide(sc, true)
	if err != nil {
		return nil, fmt.Errorf("batch side: %w", err)
	}
	if os.Getenv("EXPLORE_VERBOSE") == "1" {
		t.Logf("%s\nplain:\n%s\nbatch:\n%s", sc, plain, batch)
	}
	return compare(sc, plain, batch), nil
}

// processDiffs are the differences in rpcx's process-wide settings that
// setting up a server makes: plain rpcx changes none; the plugin must not
// either. rpcx's protocol.MaxMessageLength is put back afterwards, so
// that the scenarios run under the user's setting.
func processDiffs() []Diff {
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
}

// Command mutate checks that the test suite catches deliberate faults. It
// copies the working tree to a scratch directory once per fault, plants
// the fault there (exact text replacements in the production code), runs
// the tests of the packages the fault concerns, and reports which tests
// failed. The tests that failed are run again on an unmodified copy: one
// that fails there too is a flake, not a catch. A fault that no test
// catches, or that can no longer be planted because the code it edits
// changed, makes it exit non-zero.
//
// Run it from the module root as `make mutate`, or
// `go run ./internal/testkit/mutate [-run regexp-of-fault-names]`;
// `-list` shows the faults and whether each still plants, without
// running any test.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// edit replaces old, which must occur exactly once in file, with new.
type edit struct {
	file, old, new string
}

// fault is one deliberate defect and the packages whose tests must catch it.
type fault struct {
	name  string
	edits []edit
	pkgs  []string
}

// faults are the planted defects. Each edit's old text is copied from the
// code it breaks: when that code changes, the fault fails to plant and
// must be updated with it.
var faults = []fault{
	{
		name: "incarnation-check-dropped",
		edits: []edit{{"batchclient/internal/lane/reader.go",
			"if inc != l.hs.Incarnation {\n\t\t\t\t// Not this lane's server",
			"if false && inc != l.hs.Incarnation {\n\t\t\t\t// Not this lane's server"}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		name: "reply-to-wrong-id",
		edits: []edit{{"batchclient/internal/lane/pending.go",
			"\t\t\t\tpcs[i] = s.takeLocked(id, int(id>>shardBits&slotMask))\n",
			"\t\t\t\tpcs[(i+1)%len(replies)] = s.takeLocked(id, int(id>>shardBits&slotMask))\n"}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		name: "auth-skipped-for-second-entry",
		edits: []edit{
			{"batchserver/conn.go",
				"\tfor i := range entries {\n\t\te := &entries[i]\n",
				"\tfor i := range entries {\n\t\te := &entries[i]\n\t\tif i == 1 {\n\t\t\te.Metadata = map[string]string{\"__mutate_skip_auth\": \"1\"}\n\t\t}\n"},
			{"batchserver/dispatch.go",
				"\tif p.s.AuthFunc == nil {\n\t\treturn nil\n\t}",
				"\tif p.s.AuthFunc == nil || e.Metadata[\"__mutate_skip_auth\"] == \"1\" {\n\t\treturn nil\n\t}"},
		},
		pkgs: []string{"./batchserver/"},
	},
	{
		name: "queue-bytes-never-decremented",
		edits: []edit{{"batchclient/internal/lane/queue.go",
			"\tl.qBytes -= size\n",
			"\t_ = size\n"}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		name: "deadline-ignored-at-handler-start",
		// The check just before the handler: an entry whose deadline
		// passed while it waited (for a goroutine, behind its plugins)
		// still runs.
		edits: []edit{{"batchserver/dispatch.go",
			"\tif p.deadlinePassed(ec, e) {\n\t\t// PostCall still runs",
			"\tif false {\n\t\t// PostCall still runs"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		name: "expired-deadline-never-checked",
		edits: []edit{{"batchserver/dispatch.go",
			"\tif e.TimeoutMicros < 0 || (e.TimeoutMicros > 0 && time.Until(callerDeadline(ec, e)) <= 0) {",
			"\tif false && (e.TimeoutMicros < 0 || (e.TimeoutMicros > 0 && time.Until(callerDeadline(ec, e)) <= 0)) {"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		name: "send-lost-on-reconnect",
		// The first send a new lane writes (its first frame: every
		// connect, reconnects included) vanishes.
		edits: []edit{{"batchclient/internal/lane/writer.go",
			"\tbuf, frameSeq := ws.buf[:0], &ws.frameSeq\n",
			"\tbuf, frameSeq := ws.buf[:0], &ws.frameSeq\n\tif *frameSeq == 0 && len(batch) > 0 && batch[0].Kind == codec.KindSend {\n\t\tbatch = batch[1:]\n\t}\n"}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		name: "parked-goroutine-cap-ignored",
		edits: []edit{{"batchserver/workerloop.go",
			"if w.closed || len(w.idle) >= maxIdleWorkers {",
			"if w.closed {"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		name: "context-ignored-while-waiting-for-room",
		edits: []edit{{"batchclient/internal/lane/queue.go",
			"\t\tcase <-done:\n\t\t\tl.qmu.Lock()\n\t\t\tl.waiting--\n\t\t\tl.qmu.Unlock()\n\t\t\treturn ctxErr()\n",
			""}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		// The old owner of a push registration: the whole XClient, so a
		// removed old RPCClient takes a newer one's channel with it.
		name: "push-unregister-by-xclient",
		edits: []edit{{"batchclient/xclient_rpcclient.go",
			"func (r *rpcClient) UnregisterServerMessageChan() { r.bc.push.unregister(r.addr, r) }",
			"func (r *rpcClient) UnregisterServerMessageChan() { r.bc.push.dropXClient(r.owner) }"}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		name: "byte-window-not-enforced",
		edits: []edit{{"batchserver/bytewindow.go",
			"total > limit && total > fr.bytes {",
			"false && total > limit && total > fr.bytes {"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		name: "byte-credit-never-handed-back",
		edits: []edit{{"batchserver/bytewindow.go",
			"\t\tc.bytes.credit.Add(fr.bytes)\n",
			"\t\t_ = fr.bytes\n"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A caller that wrote its own frame (flat combining) lets go of
		// the socket without waking the writer for what it left: the end
		// of a frame a stuck peer did not take, entries queued meanwhile.
		name: "caller-frame-leftovers-stranded",
		edits: []edit{{"batchclient/internal/lane/combine.go",
			"\tmore := len(l.queue) > 0 || len(ws.rest) > 0 || len(ws.out) > 0\n",
			"\tmore := false\n"}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		// A caller that wrote its own frame leaves the frame's bytes
		// counted against QueueBytes until the writer next takes (issue
		// 14's lost frame: the next caller waits for room for ever).
		name: "caller-frame-queue-bytes-kept",
		edits: []edit{{"batchclient/internal/lane/combine.go",
			"\tl.writtenAllLocked(ws)\n",
			""}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		// The heartbeat writes before the end of a frame a caller left:
		// its bytes land in the middle of that frame.
		name: "heartbeat-inside-caller-frame",
		edits: []edit{{"batchclient/internal/lane/heartbeat.go",
			"\tif err := l.writeRest(ws); err != nil {\n\t\treturn err\n\t}\n",
			""}},
		pkgs: []string{"./batchclient/..."},
	},
	{
		name: "lane-ignores-byte-window",
		edits: []edit{{"batchclient/internal/lane/bytewindow.go",
			"if w.limit > 0 && inflight+",
			"if false && inflight+"}},
		pkgs: []string{"./batchclient/...", "./batchserver/"},
	},
	{
		// The janitor never looks: a silent lane keeps the burst's
		// parked goroutines and its reply buffers.
		name: "janitor-never-looks",
		edits: []edit{{"batchserver/janitor.go",
			"\t\tj.t = time.AfterFunc(janitorEvery, j.look)\n",
			"\t\tj.t = time.AfterFunc(time.Hour, j.look)\n"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// Replies not yet written leave the window: a client that never
		// reads makes the server hold every reply.
		name: "unwritten-replies-out-of-window",
		edits: []edit{{"batchserver/conn.go",
			"c.inflight.Add(int64(len(entries))) + c.unwritten.Load()",
			"c.inflight.Add(int64(len(entries)))"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A fail-fast refusal keeps the processor: callers retrying at
		// once on ErrOverloaded keep the lane's writer and reader off it.
		name: "failfast-refusal-never-yields",
		edits: []edit{{"batchclient/internal/lane/queue.go",
			"\truntime.Gosched()\n\treturn ErrOverloaded",
			"\t_ = runtime.Gosched\n\treturn ErrOverloaded"}},
		pkgs: []string{"./reliability/"},
	},
	{
		// A closed connection's handshake makes its state anyway.
		name: "handshake-state-after-close",
		edits: []edit{{"batchserver/plugin.go",
			"if m := p.hooks.mark(c); st == nil && m != nil {",
			"if m := p.hooks.mark(c); st == nil {\n\t\tif m == nil {\n\t\t\tm = &laneMark{}\n\t\t}"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A frame counts only once its handler runs: a drain takes a frame
		// read before then for nothing in flight.
		name: "frame-uncounted-until-its-handler-runs",
		edits: []edit{{"batchserver/shutdown.go",
			"settled = c.mark.unstarted.Load() == 0",
			"settled = c.mark.unstarted.Load() < 1<<62"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A frame read while Shutdown runs does not hold it: rpcx closes
		// the connection before the frame's goroutine counts it.
		name: "frame-read-in-shutdown-uncounted",
		edits: []edit{{"batchserver/shutdown.go",
			"if !p.rs.shuttingDown() && !(p.armed.Load() && p.rs.hooksSpent()) {",
			"if true || !p.rs.shuttingDown() && !(p.armed.Load() && p.rs.hooksSpent()) {"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A frame read once Shutdown may have found its count zero runs:
		// rpcx closes the connection under its calls, their replies are
		// lost, and Failover runs them again.
		name: "frame-read-after-the-count-runs",
		edits: []edit{{"batchserver/shutdown.go",
			"if p.rs.shuttingDown() && p.rs.hooksSpent() {\n\t\tatomic.AddInt32(p.rs.handlerMsgNum, -1)",
			"if false {\n\t\tatomic.AddInt32(p.rs.handlerMsgNum, -1)"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A lane ignores the unrun notice: the calls wait for the
		// connection's end and fail with ErrConnection.
		name: "unrun-notice-ignored",
		edits: []edit{{"batchclient/internal/lane/reader.go",
			"msg.ServiceMethod == codec.MethodUnrun:",
			"msg.ServiceMethod == \"ignored\":"}},
		pkgs: []string{"./batchclient/"},
	},
	{
		// A written reply counts as delivered: rpcx's close resets the
		// connection and drops what the client had not yet taken.
		name: "drain-ignores-untaken-output",
		edits: []edit{{"batchserver/shutdown.go",
			"n, ok := sockout.Unacked(c.c)\n\tif !ok || n == 0 {",
			"n, ok := sockout.Unacked(c.c)\n\tif true || !ok || n == 0 {"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// A client that takes nothing holds Shutdown until its context
		// ends.
		name: "untaken-output-waited-for-unbounded",
		edits: []edit{{"batchserver/shutdown.go",
			"return time.Duration(now-c.untakenSince.Load()) > c.p.opts.WriteTimeout",
			"return time.Duration(now-c.untakenSince.Load()) < 0"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// Stop leaves the address's peer as the newest: calls go on
		// finding its stopped lanes instead of the plain path.
		name: "newest-peer-kept-after-stop",
		edits: []edit{{"batchclient/client.go",
			"\tc.live.Delete(addr)\n\tc.dropNewestLocked(p)\n",
			"\tc.live.Delete(addr)\n"}},
		pkgs: []string{"./batchclient/"},
	},
	{
		// A forgotten peer (idle, or a plain server unused) stays the
		// newest: the next call meets it instead of a fresh peer.
		name: "newest-peer-kept-after-forget",
		edits: []edit{{"batchclient/client.go",
			"\t\tc.live.Delete(p.key)\n\t\tc.dropNewestLocked(p)\n",
			"\t\tc.live.Delete(p.key)\n"}},
		pkgs: []string{"./batchclient/"},
	},
	{
		// A frame's entries go back to their pool when its first entry
		// finishes, while the others still run on them.
		name: "frame-slab-released-early",
		edits: []edit{{"batchserver/bytewindow.go",
			"\tif fr == nil || fr.left.Add(-1) > 0 {\n\t\treturn\n\t}\n\tfr.slab.release()\n\tfr.slab = nil\n",
			"\tif fr == nil {\n\t\treturn\n\t}\n\tfr.slab.release()\n\tif fr.left.Add(-1) > 0 {\n\t\treturn\n\t}\n"}},
		pkgs: []string{"./batchserver/"},
	},
	{
		// An entry a user's pool ran before its Submit panicked runs
		// again, on the frame's entries given back already.
		name: "pool-entry-run-twice",
		edits: []edit{{"batchserver/pool.go",
			"if taken.CompareAndSwap(false, true) {",
			"if taken.CompareAndSwap(false, true) || true {"}},
		pkgs: []string{"./batchserver/"},
	},
}

func main() {
	only := flag.String("run", "", "run only the faults whose name matches this regexp")
	keep := flag.Bool("keep", false, "keep the scratch copies (their paths are printed)")
	timeout := flag.Duration("timeout", 8*time.Minute, "go test -timeout for each fault")
	list := flag.Bool("list", false, "list the faults (name, the files they edit, the packages whose tests must catch them) and whether each still plants, without running tests")
	flag.Parse()
	var re *regexp.Regexp
	if *only != "" {
		re = regexp.MustCompile(*only)
	}
	root, err := os.Getwd()
	if err != nil {
		die(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		die(errors.New("run mutate from the module root (make mutate)"))
	}
	if *list {
		if listFaults(root, re) > 0 {
			os.Exit(1)
		}
		return
	}
	files, err := trackedFiles(root)
	if err != nil {
		die(err)
	}
	bad := 0
	for _, f := range faults {
		if re != nil && !re.MatchString(f.name) {
			continue
		}
		start := time.Now()
		caught, err := try(root, files, f, *timeout, *keep)
		var flaky []string
		if err == nil && len(caught) > 0 {
			// A test that fails on the unmodified tree too (a flake under
			// load) proves nothing about the fault.
			caught, flaky, err = confirm(root, files, f, caught, *timeout)
		}
		took := time.Since(start).Round(time.Second)
		if len(flaky) > 0 {
			fmt.Printf("%-40s ignored    %s (failed on the unmodified tree too)\n", f.name, strings.Join(flaky, ", "))
		}
		switch {
		case err != nil:
			bad++
			fmt.Printf("%-40s ERROR      %v (%v)\n", f.name, err, took)
		case len(caught) == 0:
			bad++
			fmt.Printf("%-40s NOT CAUGHT by %s (%v)\n", f.name, strings.Join(f.pkgs, " "), took)
		default:
			fmt.Printf("%-40s caught by  %s (%v)\n", f.name, strings.Join(caught, ", "), took)
		}
	}
	if bad > 0 {
		fmt.Printf("mutate: %d fault(s) not caught or not planted\n", bad)
		os.Exit(1)
	}
	fmt.Println("mutate: every fault was caught")
}

// listFaults prints each fault matching re, the files it edits and the
// packages whose tests must catch it, and whether its edits still apply
// to the tree at root; it returns how many do not.
func listFaults(root string, re *regexp.Regexp) (bad int) {
	for _, f := range faults {
		if re != nil && !re.MatchString(f.name) {
			continue
		}
		state := "plants"
		var files []string
		for _, e := range f.edits {
			files = append(files, e.file)
			b, err := os.ReadFile(filepath.Join(root, e.file))
			if n := strings.Count(string(b), e.old); err != nil || n != 1 {
				state = "DOES NOT PLANT"
			}
		}
		if state != "plants" {
			bad++
		}
		fmt.Printf("%-40s %-15s %s -> %s\n", f.name, state, strings.Join(files, " "), strings.Join(f.pkgs, " "))
	}
	return bad
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(2)
}

// trackedFiles lists the tree's files as git sees them: committed or not,
// minus what .gitignore excludes.
func trackedFiles(root string) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// try plants f in a scratch copy and returns the tests that failed.
func try(root string, files []string, f fault, timeout time.Duration, keep bool) ([]string, error) {
	return runTests(root, files, f.name, f.edits, f.pkgs, "", timeout, keep)
}

// confirm runs the tests that caught f again on an unmodified copy, and
// splits them into those that pass there (they caught the fault) and
// those that fail there too (flaky).
func confirm(root string, files []string, f fault, caught []string, timeout time.Duration) (real, flaky []string, err error) {
	names := make([]string, len(caught))
	for i, c := range caught {
		names[i] = regexp.QuoteMeta(c[strings.LastIndex(c, ".")+1:])
	}
	failed, err := runTests(root, files, f.name+"-unmodified", nil, f.pkgs, "^("+strings.Join(names, "|")+")$", timeout, false)
	if err != nil {
		return nil, nil, err
	}
	bad := map[string]bool{}
	for _, name := range failed {
		bad[name] = true
	}
	for _, c := range caught {
		if bad[c] {
			flaky = append(flaky, c)
		} else {
			real = append(real, c)
		}
	}
	return real, flaky, nil
}

// runTests copies the tree to a scratch directory, applies edits, runs the
// tests of pkgs (those matching run, when set) and returns the failed ones.
func runTests(root string, files []string, label string, edits []edit, pkgs []string, run string, timeout time.Duration, keep bool) ([]string, error) {
	dir, err := os.MkdirTemp("", "rpcxbatch-mutate-"+label+"-")
	if err != nil {
		return nil, err
	}
	if keep {
		fmt.Printf("%-40s scratch copy %s\n", label, dir)
	} else {
		defer os.RemoveAll(dir)
	}
	for _, name := range files {
		if err := copyFile(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	for _, e := range edits {
		path := filepath.Join(dir, e.file)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if n := strings.Count(string(b), e.old); n != 1 {
			return nil, fmt.Errorf("cannot plant: the text to replace occurs %d times in %s (the code changed: update the fault)", n, e.file)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), e.old, e.new, 1)), 0o644); err != nil {
			return nil, err
		}
	}
	args := []string{"test", "-count=1", "-json", "-timeout", timeout.String()}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	failed, buildFailed := parse(out)
	cmd.Wait()
	if len(failed) == 0 && buildFailed != "" {
		return nil, fmt.Errorf("the mutated tree does not build (%s): fix the fault's edit", buildFailed)
	}
	return failed, nil
}

// parse reads go test -json output and returns the failed tests (top
// level, as package.Test) and a package that failed without any test
// failing (a build failure, or a timeout).
func parse(r io.Reader) (failed []string, buildFailed string) {
	type event struct {
		Action, Package, Test string
	}
	seen := map[string]bool{}
	pkgFailed := map[string]bool{}
	pkgHasFailedTest := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Action != "fail" {
			continue
		}
		if ev.Test == "" {
			pkgFailed[ev.Package] = true
			continue
		}
		pkgHasFailedTest[ev.Package] = true
		name := filepath.Base(ev.Package) + "." + strings.SplitN(ev.Test, "/", 2)[0]
		if !seen[name] {
			seen[name] = true
			failed = append(failed, name)
		}
	}
	for p := range pkgFailed {
		if !pkgHasFailedTest[p] {
			buildFailed = p
		}
	}
	sort.Strings(failed)
	return failed, buildFailed
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // listed by git, deleted in the work tree
		}
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

package group_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
)

// groupLogs is the rpcx logger the group tests install: it drops what rpcx
// logs (connection closes, handler panics: the tests cause both) and
// records every line logged from the group package's own code, which
// never logs.
var groupLogs = &logFromGroup{}

// logFromGroup records the log lines whose caller is in package group.
type logFromGroup struct {
	mu    sync.Mutex
	lines []string
}

// record keeps the line when the code that logged it is group's: the first
// caller outside this logger and rpcx's log package. (rpcx's client logs
// a failed dial, say, from inside a call the group made: that is rpcx's
// line, not the group's.)
func (l *logFromGroup) record(line string) {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "logFromGroup") || strings.HasPrefix(f.Function, "github.com/smallnest/rpcx/log.") {
			if !more {
				return
			}
			continue
		}
		if strings.HasPrefix(f.Function, "github.com/rpcxbatch/rpcxbatch/group.") {
			l.mu.Lock()
			l.lines = append(l.lines, fmt.Sprintf("%s (from %s)", line, f.Function))
			l.mu.Unlock()
		}
		return
	}
}

// count returns how many lines the group package has logged.
func (l *logFromGroup) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// since returns the lines logged after the first n.
func (l *logFromGroup) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[n:]...)
}

func (l *logFromGroup) Debug(v ...any)                 { l.record(fmt.Sprint(v...)) }
func (l *logFromGroup) Debugf(format string, v ...any) { l.record(fmt.Sprintf(format, v...)) }
func (l *logFromGroup) Info(v ...any)                  { l.record(fmt.Sprint(v...)) }
func (l *logFromGroup) Infof(format string, v ...any)  { l.record(fmt.Sprintf(format, v...)) }
func (l *logFromGroup) Warn(v ...any)                  { l.record(fmt.Sprint(v...)) }
func (l *logFromGroup) Warnf(format string, v ...any)  { l.record(fmt.Sprintf(format, v...)) }
func (l *logFromGroup) Error(v ...any)                 { l.record(fmt.Sprint(v...)) }
func (l *logFromGroup) Errorf(format string, v ...any) { l.record(fmt.Sprintf(format, v...)) }
func (l *logFromGroup) Fatal(v ...any)                 { l.record(fmt.Sprint(v...)) }
func (l *logFromGroup) Fatalf(format string, v ...any) { l.record(fmt.Sprintf(format, v...)) }
func (l *logFromGroup) Panic(v ...any)                 { l.record(fmt.Sprint(v...)) }
func (l *logFromGroup) Panicf(format string, v ...any) { l.record(fmt.Sprintf(format, v...)) }

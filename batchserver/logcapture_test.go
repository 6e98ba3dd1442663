package batchserver_test

import (
	"fmt"
	"strings"
	"sync"
)

// rpcxLog is the rpcx logger the batchserver tests install (TestMain):
// rpcx and the plugin log warnings on purpose in the malformed-frame
// tests; it keeps the lines, out of the test output, for tests to check.
var rpcxLog = &captureLogger{}

// captureLogger is an rpcx log.Logger that keeps every line.
type captureLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *captureLogger) add(line string) {
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

// mark returns the number of lines kept so far, for findSince.
func (l *captureLogger) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// find reports the first line containing every one of parts.
func (l *captureLogger) find(parts ...string) (string, bool) { return l.findSince(0, parts...) }

// findSince is find over the lines kept after mark returned from.
func (l *captureLogger) findSince(from int, parts ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, line := range l.lines[from:] {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return line, true
	}
	return "", false
}

func (l *captureLogger) Debug(v ...any)                 { l.add(fmt.Sprint(v...)) }
func (l *captureLogger) Debugf(format string, v ...any) { l.add(fmt.Sprintf(format, v...)) }
func (l *captureLogger) Info(v ...any)                  { l.add(fmt.Sprint(v...)) }
func (l *captureLogger) Infof(format string, v ...any)  { l.add(fmt.Sprintf(format, v...)) }
func (l *captureLogger) Warn(v ...any)                  { l.add(fmt.Sprint(v...)) }
func (l *captureLogger) Warnf(format string, v ...any)  { l.add(fmt.Sprintf(format, v...)) }

// Lines logged at ERROR start with "ERROR ", for the tests that check
// the level.
func (l *captureLogger) Error(v ...any)                 { l.add("ERROR " + fmt.Sprint(v...)) }
func (l *captureLogger) Errorf(format string, v ...any) { l.add("ERROR " + fmt.Sprintf(format, v...)) }
func (l *captureLogger) Fatal(v ...any)                 { l.add(fmt.Sprint(v...)) }
func (l *captureLogger) Fatalf(format string, v ...any) { l.add(fmt.Sprintf(format, v...)) }
func (l *captureLogger) Panic(v ...any)                 { l.add(fmt.Sprint(v...)) }
func (l *captureLogger) Panicf(format string, v ...any) { l.add(fmt.Sprintf(format, v...)) }

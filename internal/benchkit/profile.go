package benchkit

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartCPUProfile starts this process's CPU profile into file; the returned
// func stops it and writes it out. env names the environment variable
// that asked for it, in errors.
func StartCPUProfile(env, file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", env, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", env, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
)

// idleReleaseEnv carries -server-idle-release to the server process, which
// then serves with batchserver.WithIdleMemoryRelease: with -after-load,
// the report shows what the server keeps after the load with the option
// on, against a run without it.
const idleReleaseEnv = "RPCXBATCH_PERF_IDLE_RELEASE"

// passServerOptions hands the server's options to the server process
// through its environment (it inherits the harness's).
func passServerOptions(cfg Config) error {
	if cfg.ServerIdleRelease <= 0 {
		return os.Unsetenv(idleReleaseEnv)
	}
	return os.Setenv(idleReleaseEnv, cfg.ServerIdleRelease.String())
}

// serverOptions are the batch plugin's options in the server process.
func serverOptions() ([]batchserver.Option, error) {
	v := os.Getenv(idleReleaseEnv)
	if v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", idleReleaseEnv, v, err)
	}
	return []batchserver.Option{batchserver.WithIdleMemoryRelease(d)}, nil
}

// clientOptions are the batch path's client options: the idle release
// when asked for (-client-idle-release), fixed lanes (-client-lanes).
func clientOptions(cfg Config) []batchclient.Option {
	var opts []batchclient.Option
	if cfg.ClientIdleRelease > 0 {
		opts = append(opts, batchclient.WithIdleMemoryRelease(cfg.ClientIdleRelease))
	}
	if cfg.ClientLanes > 0 {
		opts = append(opts, batchclient.WithLanes(cfg.ClientLanes))
	}
	return opts
}

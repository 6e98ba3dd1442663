package main

import (
	"context"
	"fmt"
)

// pathEnvs is each path's run environment: its server process and the
// control connection to it. Every path's server is the same program
// (rpcx's server with the batch plugin, server.go), which serves plain
// rpcx and lanes alike; each path has one of its own, so that its RSS,
// goroutines and collector pacing are its own load's.
type pathEnvs map[string]*runEnv

// all returns the environments in allPaths order.
func (e pathEnvs) all() []*runEnv {
	var out []*runEnv
	for _, path := range allPaths {
		if env := e[path]; env != nil {
			out = append(out, env)
		}
	}
	return out
}

// startServers starts a server process for each path the run measures
// and dials its control service. What it started is in the result even
// when it fails, for the caller to stop.
func startServers(ctx context.Context, cfg Config, host string, prefix []string, progress *countingWriter) (pathEnvs, error) {
	envs := pathEnvs{}
	for _, path := range cfg.Paths {
		srv, err := startServer(ctx, host, path, cfg.CPUProfile, prefix, progress)
		if err != nil {
			return envs, fmt.Errorf("%s path's server: %w", path, err)
		}
		ctl, err := dialControl(srv.ctrl)
		if err != nil {
			srv.stop()
			return envs, fmt.Errorf("%s path's server: %w", path, err)
		}
		envs[path] = &runEnv{cfg: cfg, srv: srv, ctl: ctl, progress: progress}
	}
	return envs, nil
}

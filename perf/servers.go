package main

import (
	"context"
	"fmt"
	"slices"
)

// pathEnvs is each path's run environment: its server process and the
// control connection to it. With Config.SharedServer all paths share one.
// Every path's server is the same program (rpcx's server with the batch
// plugin, server.go), which serves plain rpcx and lanes alike.
type pathEnvs map[string]*runEnv

// all returns each environment once, in allPaths order.
func (e pathEnvs) all() []*runEnv {
	var out []*runEnv
	for _, path := range allPaths {
		if env := e[path]; env != nil && !slices.Contains(out, env) {
			out = append(out, env)
		}
	}
	return out
}

// startServers starts a server process for each path the run measures (one
// for all with cfg.SharedServer) and dials its control service. What it
// started is in the result even when it fails, for the caller to stop.
func startServers(ctx context.Context, cfg Config, host string, prefix []string, progress *countingWriter) (pathEnvs, error) {
	envs := pathEnvs{}
	var shared *runEnv
	for _, path := range cfg.runPaths() {
		if shared != nil {
			envs[path] = shared
			continue
		}
		name := path
		if cfg.SharedServer {
			name = ""
		}
		srv, err := startServer(ctx, host, name, prefix, progress)
		if err != nil {
			return envs, fmt.Errorf("%s path's server: %w", path, err)
		}
		ctl, err := dialControl(srv.ctrl)
		if err != nil {
			srv.stop()
			return envs, fmt.Errorf("%s path's server: %w", path, err)
		}
		env := &runEnv{cfg: cfg, srv: srv, ctl: ctl, progress: progress}
		envs[path] = env
		if cfg.SharedServer {
			shared = env
		}
	}
	return envs, nil
}

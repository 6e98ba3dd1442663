// Package etcdtest runs a throwaway single-member etcd on loopback for the
// etcd integration tests (registry/) and the lock benchmark: a fresh data
// directory and two free 127.0.0.1 ports per run, so nothing depends on, or
// disturbs, an etcd already running on the machine. It needs the etcd
// binary on PATH (Debian: apt-get install -y etcd-server).
//
// Goroutines: a reaper per etcd process (Start; ends when the process
// exits; Stop waits for it).
package etcdtest

// Package testkit holds what only the tests and the perf harness use, kept
// apart so that internal/ beside it holds only code the product runs:
// childproc (rpcx servers in child processes), etcdtest (a throwaway etcd
// on loopback), testenv (shared test settings), synstall (a loopback
// address whose dials hang, as behind a firewall that drops SYNs), testsvc
// (the services the tests register) and mutate (the `make mutate` command
// that plants faults and checks the tests catch them). Nothing in the
// product, and no example, imports it.
package testkit

package etcdtest

import "syscall"

// ChildProcAttr returns the process attributes for a child a test or an
// example starts: on Linux the child gets SIGKILL when its parent dies, so
// that a killed or crashed test run leaves no etcd (or server) behind.
func ChildProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"

	"github.com/rpcxbatch/rpcxbatch/lock"
)

// The in-process engine's transport: the lock nodes of one process call
// each other's lock Service methods directly, on the caller's goroutine.
// No bytes, no socket, no handler goroutine: what a design costs over it
// is the lock layer, its clients and the runtime (scheduling, GC) alone,
// which every transport pays on top of its own cost. It is a bound for
// the benchmark, not a way to run locks: a real node is in a process of
// its own.

var (
	// errInprocNoNode is a call to an address no node of the process has.
	errInprocNoNode = errors.New("in-process transport: no lock node at this address in this process; register the node's server with inprocNet.server first")
	// errInprocClosed is a call after Close.
	errInprocClosed = errors.New("in-process transport: closed; make a new inprocNet")
	// errInprocMethod is a method the lock service does not have.
	errInprocMethod = errors.New("in-process transport: no such lock service method")
	// errInprocType is a call whose args or reply are not the method's.
	errInprocType = errors.New("in-process transport: args or reply of the wrong type for the method")
)

// inprocNet is the lock services of one process's nodes by address, and
// the Transport they reach each other with (Call, Cast and Go, as
// *batchclient.Client has).
type inprocNet struct {
	mu       sync.RWMutex // guards services and closed
	services map[string]*lock.Service
	closed   bool
}

func newInprocNet() *inprocNet {
	return &inprocNet{services: make(map[string]*lock.Service)}
}

// server returns an rpcx server, never served, whose lock service (the
// one lock.New registers on it) this net reaches at addr.
func (t *inprocNet) server(addr string) *server.Server {
	s := server.NewServer()
	s.Plugins.Add(&inprocRegister{t: t, addr: addr})
	return s
}

// inprocRegister is an rpcx RegisterPlugin: it hands the lock service
// registered on its server to the net, which calls its methods directly.
type inprocRegister struct {
	t    *inprocNet
	addr string
}

// Register takes the lock service; other services are not the net's.
func (r *inprocRegister) Register(name string, rcvr any, _ string) error {
	svc, ok := rcvr.(*lock.Service)
	if name != lock.ServicePath || !ok {
		return nil
	}
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	if r.t.closed {
		return errInprocClosed
	}
	r.t.services[r.addr] = svc
	return nil
}

// Unregister forgets the service: calls to addr fail from then on.
func (r *inprocRegister) Unregister(name string) error {
	if name == lock.ServicePath {
		r.t.mu.Lock()
		delete(r.t.services, r.addr)
		r.t.mu.Unlock()
	}
	return nil
}

func (t *inprocNet) service(addr string) (*lock.Service, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return nil, errInprocClosed
	}
	svc := t.services[addr]
	if svc == nil {
		return nil, fmt.Errorf("%w: %s", errInprocNoNode, addr)
	}
	return svc, nil
}

// Call runs the method of the lock service at addr on this goroutine.
// The handler gets its own copy of args (a server decodes its own): the
// lock layer keeps a queued request's arguments past the reply, and
// reuses its own once the reply came. The reply is written in place: no
// handler writes it after returning. ctx is the handler's context, as
// the batch path's carries the caller's deadline; the handlers' own
// waits end with it.
func (t *inprocNet) Call(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if servicePath != lock.ServicePath {
		return fmt.Errorf("%w: %s.%s", errInprocMethod, servicePath, serviceMethod)
	}
	svc, err := t.service(addr)
	if err != nil {
		return err
	}
	return dispatch(ctx, svc, serviceMethod, args, reply)
}

// Cast is Call without a reply.
func (t *inprocNet) Cast(ctx context.Context, addr, servicePath, serviceMethod string, args any) error {
	return t.Call(ctx, addr, servicePath, serviceMethod, args, &lock.Ack{})
}

// Go is Call completed at once: the call is sent on done before Go
// returns. As rpcx's Client.Go does, a done with no room loses the
// completion rather than block the caller.
func (t *inprocNet) Go(ctx context.Context, addr, servicePath, serviceMethod string, args, reply any, done chan *client.Call) *client.Call {
	call := &client.Call{ServicePath: servicePath, ServiceMethod: serviceMethod, Args: args, Reply: reply, Done: done}
	call.Error = t.Call(ctx, addr, servicePath, serviceMethod, args, reply)
	select {
	case done <- call:
	default:
	}
	return call
}

// Close makes every later call fail.
func (t *inprocNet) Close() error {
	t.mu.Lock()
	t.closed = true
	clear(t.services)
	t.mu.Unlock()
	return nil
}

// dispatch calls svc's method with a copy of args: the struct, and the
// slices in it (TestInprocCopiesEveryReference keeps the list whole).
func dispatch(ctx context.Context, svc *lock.Service, method string, args, reply any) error {
	switch method {
	case "Acquire":
		return callCopy(ctx, svc.Acquire, args, reply, func(a *lock.AcquireArgs) {
			a.Keys, a.Released = slices.Clone(a.Keys), slices.Clone(a.Released)
		})
	case "Release":
		return callCopy(ctx, svc.Release, args, reply, func(a *lock.ReleaseArgs) { a.Keys = slices.Clone(a.Keys) })
	case "Probe":
		return callCopy(ctx, svc.Probe, args, reply, func(a *lock.ProbeArgs) { a.Path = slices.Clone(a.Path) })
	case "Abort":
		return callCopy(ctx, svc.Abort, args, reply, nil)
	case "Drop":
		return callCopy(ctx, svc.Drop, args, reply, nil)
	case "Answer":
		return callCopy(ctx, svc.Answer, args, reply, nil)
	case "Status":
		return callCopy(ctx, svc.Status, args, reply, nil)
	case "Ping":
		return callCopy(ctx, svc.Ping, args, reply, func(a *lock.PingArgs) { a.Check = slices.Clone(a.Check) })
	case "Verdict":
		return callCopy(ctx, svc.Verdict, args, reply, nil)
	}
	return fmt.Errorf("%w: %s.%s", errInprocMethod, lock.ServicePath, method)
}

// callCopy runs method m on a copy of args: the struct, then deep (nil
// for arguments that hold no slice) for what it points to.
func callCopy[A, R any](ctx context.Context, m func(context.Context, *A, *R) error, args, reply any, deep func(*A)) error {
	a, ok := args.(*A)
	r, ok2 := reply.(*R)
	if !ok || !ok2 || a == nil || r == nil {
		return fmt.Errorf("%w: %T and %T", errInprocType, args, reply)
	}
	c := *a
	if deep != nil {
		deep(&c)
	}
	return m(ctx, &c, r)
}

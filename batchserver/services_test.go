package batchserver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// TestServicesRegisteredBeforeAndAfterNew: services registered before New,
// after it, functions, and method whitelists all behave on the batch path as
// on the plain path.
func TestServicesRegisteredBeforeAndAfterNew(t *testing.T) {
	s := server.NewServer()
	require.NoError(t, s.RegisterName("Before", new(testsvc.Arith), ""))
	p, err := batchserver.New(s)
	require.NoError(t, err)
	require.NoError(t, s.RegisterName("After", new(testsvc.Arith), ""))
	require.NoError(t, s.RegisterFunction("Fn", Add, ""))
	require.NoError(t, s.RegisterNameWithMethods("OnlyMul", new(testsvc.Arith), []string{"Mul"}, ""))
	addr := serve(t, s)

	c := newClient(t)
	require.Equal(t, batchclient.Connected, waitConnected(t, c, addr).Status)
	pc := plainClient(t, addr)
	ctx := ctxT(t, 10*time.Second)

	for _, svc := range []string{"Before", "After", "OnlyMul"} {
		var r testsvc.Reply
		require.NoError(t, c.Call(ctx, addr, svc, "Mul", &testsvc.Args{A: 3, B: 4}, &r), svc)
		assert.Equal(t, 12, r.C, svc)
	}
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Fn", "Add", &testsvc.Args{A: 3, B: 4}, &r))
	assert.Equal(t, 7, r.C)

	// A method left out of the whitelist is unreachable, with rpcx's text.
	sameError := func(svc, method string) {
		t.Helper()
		var r testsvc.Reply
		errBatch := c.Call(ctx, addr, svc, method, &testsvc.Args{A: 1, B: 2}, &r)
		errPlain := pc.Call(ctx, svc, method, &testsvc.Args{A: 1, B: 2}, &r)
		require.Error(t, errPlain, "%s.%s on the plain path", svc, method)
		require.Error(t, errBatch, "%s.%s on the batch path", svc, method)
		var se client.ServiceError
		assert.True(t, errors.As(errBatch, &se), "%T", errBatch)
		assert.Equal(t, errPlain.Error(), errBatch.Error(), "%s.%s", svc, method)
	}
	sameError("OnlyMul", "Sleep")
	sameError("Fn", "Nope")
	sameError("Late", "Mul")

	// A service registered after a batched call missed it is found.
	require.NoError(t, s.RegisterName("Late", new(testsvc.Arith), ""))
	require.NoError(t, c.Call(ctx, addr, "Late", "Mul", &testsvc.Args{A: 5, B: 5}, &r))
	assert.Equal(t, 25, r.C)

	// Re-registering the whitelisted service with every method widens both
	// paths alike.
	require.NoError(t, s.RegisterName("OnlyMul", new(testsvc.Arith), ""))
	require.NoError(t, c.Call(ctx, addr, "OnlyMul", "Sleep", &testsvc.Args{A: 1, B: 8}, &r))
	assert.Equal(t, 8, r.C)
	require.NoError(t, pc.Call(ctx, "OnlyMul", "Sleep", &testsvc.Args{A: 1, B: 9}, &r))
	assert.Equal(t, 9, r.C)

	// A function added to an existing service path is found.
	require.NoError(t, s.RegisterFunctionName("Fn", "Add2", Add, ""))
	require.NoError(t, c.Call(ctx, addr, "Fn", "Add2", &testsvc.Args{A: 1, B: 1}, &r))
	assert.Equal(t, 2, r.C)
	assert.Equal(t, int64(0), counter(t, p.Metrics(), "rpcxbatch.server.errors.malformed"))
}

// TestUnregisterAll: after UnregisterAll the batch path answers exactly as
// the plain path does.
//
// Note: rpcx v1.9.4's Server.UnregisterAll only runs the plugins'
// Unregister hooks (for registries such as etcd or consul); it never removes
// a service from rpcx's own service map, so plain rpcx keeps serving every
// service afterwards. The batch plugin mirrors rpcx's table, so it keeps
// serving too. The test pins that the two paths agree, whichever way rpcx
// goes, and that the hook does not break later calls.
func TestUnregisterAll(t *testing.T) {
	addr, s, _ := startServer(t)
	c := newClient(t)
	waitConnected(t, c, addr)
	pc := plainClient(t, addr)
	ctx := ctxT(t, 5*time.Second)
	var r testsvc.Reply
	require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 2, B: 3}, &r))
	var out []byte
	require.NoError(t, c.Call(ctx, addr, "Echo", "Bytes", &[]byte{1}, &out))

	require.NoError(t, s.UnregisterAll())

	for _, tc := range []struct {
		svc, method string
		args, reply any
	}{
		{"Arith", "Mul", &testsvc.Args{A: 2, B: 3}, new(testsvc.Reply)},
		{"Echo", "Bytes", &[]byte{7}, new([]byte)},
	} {
		errPlain := pc.Call(ctx, tc.svc, tc.method, tc.args, tc.reply)
		errBatch := c.Call(ctx, addr, tc.svc, tc.method, tc.args, tc.reply)
		t.Logf("%s.%s after UnregisterAll: plain %v, batch %v", tc.svc, tc.method, errPlain, errBatch)
		if errPlain == nil {
			require.NoError(t, errBatch, "%s.%s: plain rpcx still serves it", tc.svc, tc.method)
			// And the batch path still runs it for real.
			var r testsvc.Reply
			require.NoError(t, c.Call(ctx, addr, "Arith", "Mul", &testsvc.Args{A: 4, B: 4}, &r))
			assert.Equal(t, 16, r.C)
			continue
		}
		require.Error(t, errBatch, "%s.%s: plain rpcx refuses it, the batch path must too", tc.svc, tc.method)
		assert.Equal(t, errPlain.Error(), errBatch.Error())
	}
}

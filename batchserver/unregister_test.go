package batchserver_test

import (
	"testing"
	"time"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Only a server whose Shutdown will run no Unregister hook pays for graceful
// shutdown while it runs: one that called UnregisterAll (rpcx runs its
// hooks once), whose frames then count the plugin in rpcx's requests being
// handled while their entries run. A service unregistered alone (the
// plugins' DoUnregister, as a registry plugin's user delists one service)
// and registered again leaves rpcx's Shutdown its hooks: its frames stay on
// the cheap path.
func TestUnregisterOneServiceStaysCheap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		all   bool
		count bool
	}{
		{"DoUnregister_then_Register", false, false},
		{"UnregisterAll", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := &Slowpoke{hold: time.Second}
			s := server.NewServer()
			require.NoError(t, s.RegisterName("Slowpoke", sp, ""))
			p, err := batchserver.New(s)
			require.NoError(t, err)
			addr := serve(t, s)
			if tc.all {
				require.NoError(t, s.UnregisterAll())
			} else {
				require.NoError(t, s.Plugins.DoUnregister("Slowpoke"))
				require.NoError(t, s.RegisterName("Slowpoke", sp, ""))
			}
			c := newClient(t)
			require.Equal(t, batchclient.Connected, waitConnected(t, c, addr).Status)
			done := make(chan error, 1)
			go func() {
				done <- c.Call(ctxT(t, 20*time.Second), addr, "Slowpoke", "Hold", &testsvc.Args{A: 1}, new(testsvc.Reply))
			}()
			require.True(t, eventually(10*time.Second, func() bool { return sp.started.Load() == 1 }), "the call runs")
			counted := eventually(200*time.Millisecond, func() bool { return batchserver.CountsItself(p) })
			require.Zero(t, sp.finished.Load(), "looked while the entry ran")
			assert.Equal(t, tc.count, counted, "the plugin counts itself in rpcx's requests while an entry runs")
			require.NoError(t, <-done)
		})
	}
}

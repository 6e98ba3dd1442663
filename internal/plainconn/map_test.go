package plainconn_test

import (
	"errors"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

var errMapClosed = errors.New("test: map closed")

// A Map keeps one client per address; Remove and Close close them.
func TestMapPerAddress(t *testing.T) {
	addrA, logA := serveArith(t)
	addrB, logB := serveArith(t)
	d := &dialCounter{}
	m := plainconn.NewMap(errMapClosed, func(addr string) plainconn.Config { return d.config(addr, client.DefaultOption) })

	var seen []*client.Client
	for range 3 {
		for _, addr := range []string{addrA, addrB} {
			u, err := m.Use(ctxT(t, 5*time.Second), addr)
			require.NoError(t, err)
			p, err := mul(t, u.Client, 2, 9)
			require.NoError(t, err)
			require.Equal(t, 18, p)
			seen = append(seen, u.Client)
			u.Done()
		}
	}
	require.Equal(t, int64(2), d.n.Load(), "one dial per address")
	require.Equal(t, 1, logA.count())
	require.Equal(t, 1, logB.count())
	require.NotSame(t, seen[0], seen[1])
	require.Same(t, seen[0], seen[2])

	require.NotNil(t, m.Lookup(addrA))
	m.Remove(addrA)
	require.Nil(t, m.Lookup(addrA))
	require.True(t, seen[0].IsClosing(), "Remove closed the client")
	require.False(t, seen[1].IsClosing())

	m.Close()
	require.True(t, seen[1].IsClosing(), "Close closed the client")
	_, err := m.Use(ctxT(t, 5*time.Second), addrB)
	require.ErrorIs(t, err, errMapClosed)
	require.Nil(t, m.Add(addrB))
}

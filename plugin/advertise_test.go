package plugin_test

import (
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
	"github.com/rpcxbatch/rpcxbatch/plugin"
)

// memRegistry is a register plugin that keeps what it is told, standing in
// for etcd or consul.
type memRegistry struct {
	mu   sync.Mutex
	meta map[string]string
}

func (m *memRegistry) Register(name string, _ any, metadata string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[name] = metadata
	return nil
}

func (m *memRegistry) Unregister(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.meta, name)
	return nil
}

func (m *memRegistry) get(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[name]
}

// serve starts a server with Arith registered through an advertised
// registry; batch picks whether it runs the batch plugin.
func serve(t *testing.T, batch bool) (addr, meta string, p *batchserver.Plugin) {
	t.Helper()
	s := server.NewServer()
	if batch {
		var err error
		p, err = batchserver.New(s)
		require.NoError(t, err)
	}
	reg := &memRegistry{meta: map[string]string{}}
	s.Plugins.Add(plugin.Advertise(reg, p))
	require.NoError(t, s.RegisterName("Arith", new(testsvc.Arith), "group=blue"))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(stop)
	return addr, reg.get("Arith"), p
}

func TestAdvertisedMetadata(t *testing.T) {
	_, meta, p := serve(t, true)
	v, err := url.ParseQuery(meta)
	require.NoError(t, err)
	assert.Equal(t, "blue", v.Get("group"), "the user's metadata is kept")
	assert.Equal(t, "1", v.Get("rpcxbatch"))
	assert.Equal(t, p.Options().PoolSize, atoi(t, v.Get("rpcxbatch_pool")))

	_, meta, _ = serve(t, false)
	v, err = url.ParseQuery(meta)
	require.NoError(t, err)
	assert.Equal(t, "0", v.Get("rpcxbatch"))
}

// A client reading the advertised metadata uses lanes for the batch peer and
// plain rpcx for the advertised-plain server without probing it.
func TestClientFollowsAdvertisedMetadata(t *testing.T) {
	batchAddr, batchMeta, p := serve(t, true)
	plainAddr, plainMeta, _ := serve(t, false)
	d, err := client.NewMultipleServersDiscovery([]*client.KVPair{
		{Key: "tcp@" + batchAddr, Value: batchMeta},
		{Key: "tcp@" + plainAddr, Value: plainMeta},
	})
	require.NoError(t, err)
	bc, err := batchclient.New()
	require.NoError(t, err)
	defer bc.Close()
	xc := batchclient.NewXClientWith(bc, "Arith", client.Failfast, client.RoundRobin, d, client.DefaultOption)
	defer xc.Close()

	for i := 0; i < 10; i++ {
		var r testsvc.Reply
		require.NoError(t, xc.Call(t.Context(), "Mul", &testsvc.Args{A: i, B: 2}, &r))
		assert.Equal(t, 2*i, r.C)
	}
	assert.Equal(t, batchclient.Connected, bc.Info(batchAddr).Status)
	assert.Equal(t, batchclient.NotConnected, bc.Info(plainAddr).Status, "no handshake was tried")
	c, _ := p.Metrics().Get("rpcxbatch.server.calls").(interface{ Count() int64 })
	require.NotNil(t, c)
	assert.Equal(t, int64(5), c.Count())
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

package batchserver

import (
	"testing"

	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"
)

// A read that raced with a re-registration (rpcx changes its table, then
// calls the hook) is not cached: the next lookup reads the table again.
func TestServiceReadRacingRegistrationNotCached(t *testing.T) {
	tbl, err := newServiceTable(server.NewServer())
	require.NoError(t, err)
	tbl.mu.RLock()
	gen := tbl.gen
	tbl.mu.RUnlock()
	stale := map[string]*method{"Old": {}}
	tbl.forget("Svc") // the hook ran while the read was under way
	tbl.store("Svc", stale, gen)
	_, cached := tbl.cache["Svc"]
	require.False(t, cached)

	tbl.store("Svc", stale, tbl.gen) // a read that began after it is kept
	_, cached = tbl.cache["Svc"]
	require.True(t, cached)
}

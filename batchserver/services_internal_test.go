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
	gen := tbl.gen.Load()
	stale := map[string]*method{"Old": {}}
	tbl.forget("Svc") // the hook ran while the read was under way
	tbl.store("Svc", stale, gen)
	_, cached := (*tbl.cache.Load())["Svc"]
	require.False(t, cached)

	tbl.store("Svc", stale, tbl.gen.Load()) // a read that began after it is kept
	_, cached = (*tbl.cache.Load())["Svc"]
	require.True(t, cached)
}

// A published cache is never changed: a lookup holding the map of a
// moment keeps seeing that moment, while later lookups see the change.
func TestServiceCachePublishedByCopy(t *testing.T) {
	tbl, err := newServiceTable(server.NewServer())
	require.NoError(t, err)
	tbl.store("Svc", map[string]*method{"M": {}}, tbl.gen.Load())
	held := *tbl.cache.Load()
	tbl.forget("Svc")
	_, inHeld := held["Svc"]
	require.True(t, inHeld, "forget changed a map a lookup may be reading")
	_, now := (*tbl.cache.Load())["Svc"]
	require.False(t, now)
}

// Package registry_test runs rpcxbatch against a real service registry:
// a throwaway etcd (internal/testkit/etcdtest) with rpcx-etcd's register plugin
// wrapped by plugin.Advertise on the servers, and rpcx-etcd's discovery
// under the drop-in XClient and under group calls on the client.
//
// Without an etcd binary on PATH the tests skip, saying so, or fail when
// CI=true: CI must run them.
package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	rlog "github.com/smallnest/rpcx/log"
	"github.com/smallnest/rpcx/protocol"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/etcdtest"
)

var (
	etcdOnce sync.Once
	etcdSrv  *etcdtest.Etcd
	etcdErr  error
)

func TestMain(m *testing.M) {
	// rpcx and rpcx-etcd log every connection close and deregistration;
	// the tests check what matters themselves.
	rlog.SetDummyLogger()
	// batchserver.New sets rpcx's global protocol.MaxMessageLength when it
	// is still 0, without synchronisation, so parallel tests creating
	// batch servers race on it. Set before any test, as New's doc allows
	// (its default frame cap, 16 MiB, plus headroom), New only reads it.
	protocol.MaxMessageLength = 16<<20 + 64<<10
	if spec := os.Getenv(childEnv); spec != "" {
		// Re-executed by startChild: be a server until killed.
		os.Exit(runChild(spec))
	}
	code := m.Run()
	if etcdSrv != nil {
		etcdSrv.Stop()
	}
	os.Exit(code)
}

// needEtcd returns the package's throwaway etcd, started on first use. No
// etcd binary: the test fails when CI=true (CI must run these tests) and
// is skipped, with the reason, otherwise. An etcd that is installed but
// does not start fails the test.
func needEtcd(t *testing.T) *etcdtest.Etcd {
	t.Helper()
	etcdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		etcdSrv, etcdErr = etcdtest.Start(ctx)
	})
	switch {
	case etcdErr == nil:
		return etcdSrv
	case errors.Is(etcdErr, etcdtest.ErrNotInstalled) && os.Getenv("CI") == "true":
		t.Fatalf("etcd-server must be installed for CI (%s): the etcd integration tests cannot run: %v", etcdtest.InstallHint, etcdErr)
	case errors.Is(etcdErr, etcdtest.ErrNotInstalled):
		t.Skip("etcd not installed: " + etcdtest.InstallHint + "; the etcd integration tests did not run")
	default:
		t.Fatalf("throwaway etcd did not start: %v", etcdErr)
	}
	return nil
}

// basePath is the test's own rpcx base path in the shared etcd, so that
// parallel tests do not see each other's servers.
func basePath(t *testing.T) string {
	return fmt.Sprintf("/rpcxbatch_test/%s", t.Name())
}

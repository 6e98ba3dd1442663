package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerIdleReleaseFlag: -server-idle-release reaches the server
// process's options through its environment; off by default.
func TestServerIdleReleaseFlag(t *testing.T) {
	t.Setenv(idleReleaseEnv, "")
	c, err := parseConfig([]string{"-server-idle-release", "5s"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, c.ServerIdleRelease)
	require.NoError(t, passServerOptions(c))
	opts, err := serverOptions()
	require.NoError(t, err)
	assert.Len(t, opts, 1)

	c, err = parseConfig(nil, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, c.ServerIdleRelease)
	require.NoError(t, passServerOptions(c))
	opts, err = serverOptions()
	require.NoError(t, err)
	assert.Empty(t, opts)
}

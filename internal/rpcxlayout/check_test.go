package rpcxlayout

import (
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayoutAsRPCXv194 fails, naming each field, when the rpcx in go.mod
// (or Go's sync.Once) is not laid out as rpcxbatch reads it.
func TestLayoutAsRPCXv194(t *testing.T) {
	for _, err := range Check() {
		t.Error(err)
	}
}

// The check names the struct and field that differ, and what it found.
func TestCheckNamesTheField(t *testing.T) {
	type server struct {
		inShutdown int64
		mu         sync.Mutex
		serviceMap map[string]int
	}
	st := reflect.TypeFor[server]()
	err := checkField(st, "inShutdown", reflect.TypeFor[int32]())
	require.EqualError(t, err, "rpcx layout: rpcxlayout.server.inShutdown: want int32, found int64; rpcxbatch reads github.com/smallnest/rpcx v1.9.4, pin that version")
	err = checkField(st, "handlerMsgNum", reflect.TypeFor[int32]())
	require.ErrorContains(t, err, "rpcxlayout.server.handlerMsgNum: want int32, found no such field")
	err = checkField(st, "mu", reflect.TypeFor[sync.RWMutex]())
	require.ErrorContains(t, err, "server.mu: want sync.RWMutex, found sync.Mutex")
	_, err = mapOfStructs(st, "serviceMap")
	require.ErrorContains(t, err, "server.serviceMap: want map[string]*struct, found map[string]int")
	require.NoError(t, checkField(st, "inShutdown", reflect.TypeFor[int64]()))
}

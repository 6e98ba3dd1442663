package batchserver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeadlineCtxFiresAtDeadline(t *testing.T) {
	ctx := newDeadlineCtx(context.Background(), time.Now().Add(50*time.Millisecond))
	cancel := ctx.end
	defer cancel()
	require.NoError(t, ctx.Err())
	d, ok := ctx.Deadline()
	assert.True(t, ok)
	assert.WithinDuration(t, time.Now().Add(50*time.Millisecond), d, 20*time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done did not close at the deadline")
	}
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
	// A context derived from it ends with it.
	child, stop := context.WithCancel(ctx)
	defer stop()
	<-child.Done()
}

func TestDeadlineCtxCancel(t *testing.T) {
	ctx := newDeadlineCtx(context.Background(), time.Now().Add(time.Hour))
	cancel := ctx.end
	done := ctx.Done()
	cancel()
	select {
	case <-done:
	default:
		t.Fatal("cancel did not close Done")
	}
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	cancel() // idempotent

	// Cancelled before anyone asked for Done: Done is born closed.
	ctx = newDeadlineCtx(context.Background(), time.Now().Add(time.Hour))
	cancel = ctx.end
	cancel()
	<-ctx.Done()
}

func TestDeadlineCtxAlreadyPast(t *testing.T) {
	ctx := newDeadlineCtx(context.Background(), time.Now().Add(-time.Second))
	cancel := ctx.end
	defer cancel()
	<-ctx.Done()
	assert.ErrorIs(t, ctx.Err(), context.DeadlineExceeded)
}

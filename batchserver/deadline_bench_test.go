package batchserver

import (
	"context"
	"testing"
	"time"
)

// BenchmarkEntryDeadline compares an entry's deadline context, made and
// ended once per entry, with context.WithDeadline and its cancel: for a
// handler that never asks for Done (most) and for one that does.
func BenchmarkEntryDeadline(b *testing.B) {
	bg := context.Background()
	d := time.Now().Add(time.Hour)
	b.Run("deadlineCtx", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c := newDeadlineCtx(bg, d)
				c.end()
			}
		})
	})
	b.Run("WithDeadline", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, cancel := context.WithDeadline(bg, d)
				cancel()
			}
		})
	})
	b.Run("deadlineCtx+Done", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c := newDeadlineCtx(bg, d)
				_ = c.Done()
				_ = c.Err()
				c.end()
			}
		})
	})
	b.Run("WithDeadline+Done", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, cancel := context.WithDeadline(bg, d)
				_ = ctx.Done()
				_ = ctx.Err()
				cancel()
			}
		})
	})
}

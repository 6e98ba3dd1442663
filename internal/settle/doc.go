// Package settle lets a batch writer give goroutines that became runnable
// together the chance to queue their work before it takes the queue.
//
// It starts no goroutines.
package settle

// Package examplecheck holds the test that keeps the examples copyable: it
// copies every program under example/, unchanged, and the README's Go
// snippets, each wrapped in a function, into a fresh module outside the
// repository that requires rpcxbatch (replaced by this checkout, as `make
// modcheck` does), and builds it there. An example that imports one of
// rpcxbatch's internal packages, or a snippet that no longer compiles
// against the API, fails it.
//
// It has no code outside its test; `go test ./internal/examplecheck/`
// (part of `make test` and `make check`) runs it. It starts no
// goroutines; its test runs the go command.
package examplecheck

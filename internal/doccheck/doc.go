// Package doccheck holds the tests that keep the project's documentation
// true to the repository: every relative link in README.md and docs/*.md
// names a file or directory of the repository, and every #anchor a
// heading of the page it points into (GitHub's anchors: the heading's text
// in lower case, punctuation dropped, spaces turned into hyphens, repeats
// numbered -1, -2 and so on); docs/architecture.md's Layout table has a
// row for every package of the module, and no other, whose third column
// allows every import of the module's own packages the package makes
// outside its tests; and the library's error texts keep one style: each
// begins with its package's name ("lock: ..."), and an exported error's
// text says what happened in at most 72 characters, its advice being in
// its doc comment (errtext_test.go).
//
// It has no code outside its tests; `go test ./internal/doccheck/` (part
// of `make test`) runs the checks and names each difference. It starts no
// goroutines.
package doccheck

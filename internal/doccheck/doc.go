// Package doccheck holds the test that keeps the project's documentation
// linked: every relative link in README.md and docs/*.md must name a file
// or directory of the repository, and every #anchor a heading of the page
// it points into (GitHub's anchors: the heading's text in lower case,
// punctuation dropped, spaces turned into hyphens, repeats numbered -1,
// -2 and so on). It also keeps the library's error texts in one style:
// each begins with its package's name ("lock: ..."), and an exported
// error's text says what happened in at most 72 characters, its advice
// being in its doc comment (errtext_test.go).
//
// It has no code outside its tests; `go test ./internal/doccheck/` (part
// of `make test`) runs the checks and names each link that does not
// resolve and each error text out of style.
// It starts no goroutines.
package doccheck

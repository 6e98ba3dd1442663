// Package doccheck holds the test that keeps the project's documentation
// linked: every relative link in README.md and docs/*.md must name a file
// or directory of the repository, and every #anchor a heading of the page
// it points into (GitHub's anchors: the heading's text in lower case,
// punctuation dropped, spaces turned into hyphens, repeats numbered -1,
// -2 and so on).
//
// It has no code outside its test; `go test ./internal/doccheck/` (part of
// `make test`) runs the check and names each link that does not resolve.
// It starts no goroutines.
package doccheck

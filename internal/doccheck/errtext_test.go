package doccheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxSentinelText bounds the text of an exported error variable: it says
// what happened; what to do about it goes in its doc comment.
const maxSentinelText = 72

// notLibrary are the directories whose code is not the library's: tools,
// examples, benchmarks and test helpers.
var notLibrary = []string{"cmd", "example", "perf", "internal/testkit", "internal/benchkit", "internal/explore", "internal/doccheck", "internal/examplecheck"}

// rpcxTexts are the beginnings of error texts that mirror rpcx v1.9.4's
// own, which the drop-in returns per call as rpcx does: they keep rpcx's
// wording, not this module's prefix.
var rpcxTexts = []string{"rpcx: ", "can not find codec for ", "this xclient is closed"}

// TestErrorTextsHaveTheirPackagePrefix fails naming every error text of
// the library's non-test code that does not begin with its package's
// name ("lock: ...", "batchclient: ..."; a package under internal/ of a
// public one takes that one's name, a package of internal/ its own), and
// every exported error variable whose text is longer than
// maxSentinelText. A text that wraps another error after some context
// ("node %s: %w") or starts with a verb ("%w: ...") is left alone: the
// error it wraps carries the prefix. Texts that mirror rpcx's are kept.
func TestErrorTextsHaveTheirPackagePrefix(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	problems, checked, err := checkErrorTexts(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 50 {
		t.Fatalf("checked %d error texts under %s: is the test run from the repository?", checked, root)
	}
}

// TestErrorTextCheckerFindsViolations plants each kind of violation in a
// scratch module and checks that each is reported and the good texts are
// not, so that TestErrorTextsHaveTheirPackagePrefix cannot pass by seeing
// nothing.
func TestErrorTextCheckerFindsViolations(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("lock/errors.go", `package lock

import (
	"errors"
	"fmt"
)

var (
	ErrGood = errors.New("lock: deadlock")
	ErrOtherPrefix = errors.New("rpcxbatch/lock: deadlock")
	ErrLong = errors.New("lock: a text that goes on and on with advice about what the caller should do next")
	ErrWrapped = fmt.Errorf("%w: detail", ErrGood)
	errQuiet = errors.New("no prefix at all")
)

func f(n int, err error) error {
	if n == 0 {
		return fmt.Errorf("node %d: %w", n, err)
	}
	if n == 1 {
		return fmt.Errorf("unknown mode %d", n)
	}
	if n == 2 {
		return errors.New("rpcx: can't find service " + "x")
	}
	return fmt.Errorf("lock: mode %d", n)
}
`)
	write("lock/errors_test.go", "package lock\n\nimport \"errors\"\n\nvar errT = errors.New(\"anything\")\n")
	write("batchclient/internal/lane/lane.go", "package lane\n\nimport \"errors\"\n\nvar ErrA = errors.New(\"batchclient: a\")\nvar ErrB = errors.New(\"lane: b\")\n")
	write("internal/fastcodec/f.go", "package fastcodec\n\nimport \"errors\"\n\nvar ErrA = errors.New(\"fastcodec: a\")\n")
	write("cmd/tool/main.go", "package main\n\nimport \"errors\"\n\nvar errX = errors.New(\"anything\")\n")
	problems, _, err := checkErrorTexts(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, fmt.Sprintf("%s:%d: %s", p.file, p.line, p.why))
	}
	want := []string{
		`batchclient/internal/lane/lane.go:6: "lane: b" does not begin with "batchclient: "`,
		`lock/errors.go:10: "rpcxbatch/lock: deadlock" does not begin with "lock: "`,
		`lock/errors.go:11: ErrLong's text is 81 characters, more than 72: move the advice to its doc comment`,
		`lock/errors.go:13: "no prefix at all" does not begin with "lock: "`,
		`lock/errors.go:21: "unknown mode %d" does not begin with "lock: "`,
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// errProblem is one error text that breaks the rules.
type errProblem struct {
	file string // slash path under the root
	line int
	why  string
}

func (p errProblem) String() string { return fmt.Sprintf("%s:%d: %s", p.file, p.line, p.why) }

// checkErrorTexts checks the error texts of the library's non-test Go
// files under root, and returns the problems and how many texts it
// checked.
func checkErrorTexts(root string) ([]errProblem, int, error) {
	var problems []errProblem
	checked := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || contains(notLibrary, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || !strings.Contains(rel, "/") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		prefix := errPrefix(rel)
		at := func(n ast.Node) int { return fset.Position(n.Pos()).Line }
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			text, ok := errorText(call)
			if !ok {
				return true
			}
			checked++
			if strings.HasPrefix(text, "%") || (strings.Contains(text, "%w") && isErrorf(call)) {
				return true
			}
			if !strings.HasPrefix(text, prefix) && !hasAnyPrefix(text, rpcxTexts) {
				problems = append(problems, errProblem{rel, at(call), fmt.Sprintf("%q does not begin with %q", text, prefix)})
			}
			return true
		})
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !name.IsExported() || !strings.HasPrefix(name.Name, "Err") || i >= len(vs.Values) {
						continue
					}
					call, ok := vs.Values[i].(*ast.CallExpr)
					if !ok {
						continue
					}
					if text, ok := errorText(call); ok && len(text) > maxSentinelText {
						problems = append(problems, errProblem{rel, at(name), fmt.Sprintf("%s's text is %d characters, more than %d: move the advice to its doc comment", name.Name, len(text), maxSentinelText)})
					}
				}
			}
		}
		return nil
	})
	return problems, checked, err
}

// errPrefix is the prefix of the error texts of the file at rel: the
// name of its top directory, or of the package under internal/.
func errPrefix(rel string) string {
	parts := strings.Split(rel, "/")
	if parts[0] == "internal" && len(parts) > 2 {
		return parts[1] + ": "
	}
	return parts[0] + ": "
}

// errorText returns the text of an errors.New or fmt.Errorf call: its
// literal, or the literal a concatenation begins with.
func errorText(call *ast.CallExpr) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || !(pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf") {
		return "", false
	}
	arg := call.Args[0]
	for {
		b, ok := arg.(*ast.BinaryExpr)
		if !ok || b.Op != token.ADD {
			break
		}
		arg = b.X
	}
	lit, ok := arg.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func isErrorf(call *ast.CallExpr) bool {
	return call.Fun.(*ast.SelectorExpr).Sel.Name == "Errorf"
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

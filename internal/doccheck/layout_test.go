package doccheck

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layoutPage is the page whose Layout table lists every package.
const layoutPage = "docs/architecture.md"

// TestArchitectureListsEveryPackage fails naming every package of the
// module that docs/architecture.md's Layout table leaves out, every row
// that names no package, and every import of the module's own packages,
// outside tests, that a package's row does not allow.
func TestArchitectureListsEveryPackage(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := modulePackages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found %d packages under %s: is the test run from the repository?", len(pkgs), root)
	}
	rows, err := layoutRows(filepath.Join(root, filepath.FromSlash(layoutPage)))
	if err != nil {
		t.Fatal(err)
	}
	problems := checkLayout(pkgs, rows)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("%d difference(s) between the packages and %s's Layout table: add or fix the row (package in the first column, the module's packages it may import in the third)", len(problems), layoutPage)
	}
}

// TestLayoutCheckFindsDrift builds a scratch module whose Layout table
// leaves a package out, names one that does not exist, lists one twice
// and misses an import, and checks that each is reported and nothing
// else, so that TestArchitectureListsEveryPackage cannot pass by seeing
// nothing.
func TestLayoutCheckFindsDrift(t *testing.T) {
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
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("a/a.go", "package a\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/b\"\n\t\"example.com/m/internal/c\"\n)\n\nvar _ = fmt.Sprint(b.X, c.X)\n")
	write("a/a_test.go", "package a\n\nimport \"example.com/m/internal/d\"\n\nvar _ = d.X\n")
	write("b/b.go", "package b\n\n// X is.\nconst X = 1\n")
	write("internal/c/c.go", "package c\n\n// X is.\nconst X = 1\n")
	write("internal/d/d_test.go", "package d_test\n")
	write("internal/c/testdata/x.go", "package ignored\n")
	write(".hidden/h.go", "package h\n")
	write("docs/architecture.md", strings.Join([]string{
		"# Architecture",
		"",
		"| not | this | table |",
		"|---|---|---|",
		"| `ignored` | before the Layout heading | none |",
		"",
		"## Layout",
		"",
		"| package | job | may import |",
		"|---|---|---|",
		"| `a` | uses b and c | `b` |",
		"| `b/` | a leaf | none |",
		"| `b` | again | none |",
		"| `gone` | no such package | none |",
		"",
		"| `later` | a second table is not read | none |",
		"",
	}, "\n"))
	pkgs, err := modulePackages(root)
	if err != nil {
		t.Fatal(err)
	}
	wantPkgs := map[string][]string{"a": {"b", "internal/c"}, "b": nil, "internal/c": nil, "internal/d": nil}
	if !reflect.DeepEqual(pkgs, wantPkgs) {
		t.Errorf("packages and their imports: %v, want %v", pkgs, wantPkgs)
	}
	rows, err := layoutRows(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := checkLayout(pkgs, rows)
	want := []string{
		"a imports internal/c, which its row does not allow",
		"b has two rows",
		"gone has a row but no package",
		"internal/c has no row",
		"internal/d has no row",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// modulePackages returns every package directory under root (slash paths
// relative to it; directories Go ignores, testdata and those starting with
// . or _, left out) with the module's own packages its non-test files
// import, sorted.
func modulePackages(root string) (map[string][]string, error) {
	modPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		imports := pkgs[dir]
		if strings.HasSuffix(name, "_test.go") {
			pkgs[dir] = imports
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, spec.Path.Value, err)
			}
			if own, ok := strings.CutPrefix(p, modPath+"/"); ok && !contains(imports, own) {
				imports = append(imports, own)
			}
		}
		sort.Strings(imports)
		pkgs[dir] = imports
		return nil
	})
	return pkgs, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// modulePath reads the module line of a go.mod.
func modulePath(goMod string) (string, error) {
	b, err := os.ReadFile(goMod)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no module line", goMod)
}

// layoutRow is one row of the Layout table: a package and the module's
// packages it may import.
type layoutRow struct {
	pkg   string
	allow []string
}

var codeSpanText = regexp.MustCompile("`([^`]+)`")

// layoutRows reads the first table after the "## Layout" heading of the
// page at path. A row's first cell is the package as a code span (a
// trailing slash dropped), its third "none" or the packages it may import
// as code spans.
func layoutRows(path string) ([]layoutRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []layoutRow
	inLayout, inTable := false, false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if !inLayout {
			inLayout = l == "## Layout"
			continue
		}
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(l, "|"), "|")
		first := strings.TrimSpace(cells[0])
		if first == "package" || strings.Trim(first, "-: ") == "" {
			continue // the header and its rule
		}
		m := codeSpanText.FindStringSubmatch(first)
		if m == nil || m[0] != first || len(cells) != 3 {
			return nil, fmt.Errorf("%s:%d: a Layout row is | `package` | job | may import |: %q", path, n, l)
		}
		row := layoutRow{pkg: strings.TrimSuffix(m[1], "/")}
		for _, a := range codeSpanText.FindAllStringSubmatch(cells[2], -1) {
			row.allow = append(row.allow, strings.TrimSuffix(a[1], "/"))
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no table under a \"## Layout\" heading", path)
	}
	return rows, nil
}

// checkLayout compares the packages and their imports with the rows and
// returns each difference, sorted.
func checkLayout(pkgs map[string][]string, rows []layoutRow) []string {
	var problems []string
	byPkg := map[string]layoutRow{}
	for _, r := range rows {
		if _, dup := byPkg[r.pkg]; dup {
			problems = append(problems, r.pkg+" has two rows")
			continue
		}
		byPkg[r.pkg] = r
		if _, ok := pkgs[r.pkg]; !ok {
			problems = append(problems, r.pkg+" has a row but no package")
		}
	}
	for pkg, imports := range pkgs {
		r, ok := byPkg[pkg]
		if !ok {
			problems = append(problems, pkg+" has no row")
			continue
		}
		for _, imp := range imports {
			if !contains(r.allow, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which its row does not allow", pkg, imp))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

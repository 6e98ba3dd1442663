package explore

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docSection is the heading of docs/compatibility.md's section that lists
// the accepted differences, one table row per entry.
const docSection = "## What differs"

// TestWhatDiffersIsTheAcceptedList fails when docs/compatibility.md's
// "What differs" table and the accepted list differ: the same entries, in
// the same order, with the same item and description. On failure it
// prints the table the list makes, to paste into the page.
func TestWhatDiffersIsTheAcceptedList(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := docRows(filepath.Join(root, "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(accepted))
	for i, a := range accepted {
		want[i] = docRow(a)
	}
	ok := len(rows) == len(want)
	for i := 0; ok && i < len(rows); i++ {
		ok = rows[i] == want[i]
	}
	if ok {
		return
	}
	for i := 0; i < max(len(rows), len(want)); i++ {
		var got, w string
		if i < len(rows) {
			got = rows[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if got != w {
			t.Errorf("row %d:\n\tdocs: %s\n\tlist: %s", i+1, orNone(got), orNone(w))
		}
	}
	t.Logf("the table the accepted list makes (docs/compatibility.md, %q):\n%s\n%s", docSection, docTableHeader, strings.Join(want, "\n"))
}

const docTableHeader = "| id | issue 43 item | difference |\n|---|---|---|"

// docRow is an entry as its row of the docs' table.
func docRow(a Accepted) string {
	return fmt.Sprintf("| `%s` | %s | %s |", a.ID, a.Item, strings.ReplaceAll(a.Desc, "|", `\|`))
}

// docRows are the table rows (not the header) of the section docSection
// of the page at path, as they are written.
func docRows(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []string
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			in = line == docSection
			found = found || in
			continue
		}
		if !in || !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| id |") {
			continue
		}
		rows = append(rows, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%s has no %q section", path, docSection)
	}
	return rows, nil
}

// moduleRoot walks up from the working directory to the go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the test inside the module")
		}
		dir = parent
	}
}

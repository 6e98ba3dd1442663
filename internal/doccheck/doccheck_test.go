package doccheck

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinksResolve fails naming every relative link of README.md and
// docs/*.md whose file, or whose #anchor in that file, does not exist.
func TestDocLinksResolve(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d documentation files under %s (want README.md and docs/*.md): is the test run from the repository?", len(files), root)
	}
	problems, err := checkLinks(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Logf("%d dead relative link(s): fix the target, or the heading the anchor names (anchors are GitHub's: lower case, punctuation dropped, spaces to hyphens)", len(problems))
	}
}

// TestLinkCheckerFindsDeadLinks plants dead links of every kind in a
// scratch tree and checks that each one is reported, and the live ones
// are not, so that TestDocLinksResolve cannot pass by seeing nothing.
func TestLinkCheckerFindsDeadLinks(t *testing.T) {
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
	write("README.md", strings.Join([]string{
		"# Title",
		"",
		"## How lanes are sized",
		"",
		"[live page](docs/a.md) [live anchor](docs/a.md#server-push-rpcxs-bidirectional-mode)",
		"[live local](#how-lanes-are-sized) [live dir](docs/) [web](https://example.com/x.md)",
		"[dead page](docs/missing.md) and [dead anchor](docs/a.md#no-such-heading)",
		"[dead local](#how-lanes-are-size) ![dead image](img/none.svg)",
		"`[in code](docs/missing-in-code.md)`",
		"```",
		"[in a fence](docs/missing-in-fence.md)",
		"```",
		"[escaping](../outside.md)",
		"",
	}, "\n"))
	write("docs/a.md", strings.Join([]string{
		"# A",
		"## Server push (rpcx's bidirectional mode)",
		"[back](../README.md#title) [dead back](../README.md#a)",
		"",
	}, "\n"))
	files, err := docFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := checkLinks(root, files)
	if err != nil {
		t.Fatal(err)
	}
	var got, full []string
	for _, p := range problems {
		got = append(got, fmt.Sprintf("%s:%d: %s", p.file, p.line, p.link))
		full = append(full, p.String())
	}
	want := []string{
		"README.md:7: [dead page](docs/missing.md)",
		"README.md:7: [dead anchor](docs/a.md#no-such-heading)",
		"README.md:8: [dead local](#how-lanes-are-size)",
		"README.md:8: ![dead image](img/none.svg)",
		"README.md:13: [escaping](../outside.md)",
		"docs/a.md:3: [dead back](../README.md#a)",
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reported:\n%s\nwant:\n%s\nfull report:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(full, "\n"))
	}
}

// TestHeadingAnchors pins the anchor rule to GitHub's for the kinds of
// heading the documentation has.
func TestHeadingAnchors(t *testing.T) {
	lines := []string{
		"# rpcxbatch",
		"## Distributed locks: `lock/`",
		"### Benchmark: elock's designs",
		"## Server push (rpcx's bidirectional mode)",
		"## Client: a drop-in XClient",
		"## Semantics",
		"## Semantics",
		"## Operations: metrics, tuning, memory ##",
		"## [Linked](x.md) *heading* with_underscore",
	}
	want := []string{
		"rpcxbatch",
		"distributed-locks-lock",
		"benchmark-elocks-designs",
		"server-push-rpcxs-bidirectional-mode",
		"client-a-drop-in-xclient",
		"semantics",
		"semantics-1",
		"operations-metrics-tuning-memory",
		"linked-heading-with_underscore",
	}
	got := headingAnchors(lines)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anchors:\n%q\nwant:\n%q", got, want)
	}
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

// docFiles lists README.md and docs/*.md under root, as slash paths
// relative to it.
func docFiles(root string) ([]string, error) {
	var files []string
	if _, err := os.Stat(filepath.Join(root, "README.md")); err == nil {
		files = append(files, "README.md")
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files, nil
}

var (
	// inlineLink matches [text](target) and ![alt](target), with an
	// optional "title" after the target.
	inlineLink = regexp.MustCompile(`(!?)\[([^\]]*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [label]: target
	refDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// codeSpan matches an inline code span (one or more backticks).
	codeSpan = regexp.MustCompile("(`+)[^`]*?(`+)")
	// scheme matches a URL's scheme (https:, mailto:).
	scheme  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	heading = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	fence   = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// link is one relative link found in a page.
type link struct {
	line   int
	text   string // as written, for the report
	target string
}

// page is what the check needs of one Markdown file.
type page struct {
	anchors map[string]bool
	links   []link
}

// readPage reads a Markdown file's headings' anchors and its relative
// links, outside fenced code blocks and code spans.
func readPage(path string) (page, error) {
	f, err := os.Open(path)
	if err != nil {
		return page{}, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return page{}, fmt.Errorf("read %s: %w", path, err)
	}
	prose := proseLines(lines)
	p := page{anchors: map[string]bool{}}
	for _, a := range headingAnchors(prose) {
		p.anchors[a] = true
	}
	for i, l := range prose {
		l = codeSpan.ReplaceAllString(l, "")
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			if external(m[3]) {
				continue
			}
			p.links = append(p.links, link{line: i + 1, text: m[1] + "[" + m[2] + "](" + m[3] + ")", target: m[3]})
		}
		if m := refDef.FindStringSubmatch(l); m != nil && !external(m[1]) {
			p.links = append(p.links, link{line: i + 1, text: strings.TrimSpace(l), target: m[1]})
		}
	}
	return p, nil
}

// proseLines returns the lines with those inside fenced code blocks
// blanked, so that line numbers still match the file.
func proseLines(lines []string) []string {
	out := make([]string, len(lines))
	open := ""
	for i, l := range lines {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case open == "":
				open = m[1]
			case open == m[1]:
				open = ""
			}
			continue
		}
		if open == "" {
			out[i] = l
		}
	}
	return out
}

// external reports whether a link target leaves the repository (a URL,
// mailto:, a protocol-relative address) and so is not checked here.
func external(target string) bool {
	return scheme.MatchString(target) || strings.HasPrefix(target, "//")
}

// headingAnchors returns the GitHub anchor of each ATX heading among
// lines, in order, numbering repeats as GitHub does.
func headingAnchors(lines []string) []string {
	seen := map[string]int{}
	var anchors []string
	for _, l := range lines {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		base := slug(m[2])
		a := base
		if n := seen[base]; n > 0 {
			a = fmt.Sprintf("%s-%d", base, n)
		}
		seen[base]++
		anchors = append(anchors, a)
	}
	return anchors
}

var linkInHeading = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor for a heading's text: the rendered text (code
// spans' content, links' text, no emphasis marks) in lower case, letters,
// digits, hyphens and underscores kept, spaces turned into hyphens, the
// rest dropped.
func slug(text string) string {
	text = linkInHeading.ReplaceAllString(text, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// problem is one relative link that does not resolve.
type problem struct {
	file string // slash path under the root
	line int
	link string // as written
	why  string
}

// String reads "file:line: link: why".
func (p problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.file, p.line, p.link, p.why)
}

// checkLinks returns each relative link of files (slash paths under root)
// that does not resolve.
func checkLinks(root string, files []string) ([]problem, error) {
	pages := map[string]page{} // by slash path under root
	load := func(rel string) (page, error) {
		if p, ok := pages[rel]; ok {
			return p, nil
		}
		p, err := readPage(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return page{}, err
		}
		pages[rel] = p
		return p, nil
	}
	var problems []problem
	for _, file := range files {
		p, err := load(file)
		if err != nil {
			return nil, err
		}
		for _, l := range p.links {
			if why := resolve(root, file, l.target, load); why != "" {
				problems = append(problems, problem{file: file, line: l.line, link: l.text, why: why})
			}
		}
	}
	return problems, nil
}

// resolve says why target, a link in file, does not resolve, or "" when
// it does.
func resolve(root, file, target string, load func(string) (page, error)) string {
	pathPart, anchor, _ := strings.Cut(target, "#")
	pathPart, err := url.PathUnescape(pathPart)
	if err != nil {
		return fmt.Sprintf("bad escape in the path (%v)", err)
	}
	if anchor, err = url.PathUnescape(anchor); err != nil {
		return fmt.Sprintf("bad escape in the anchor (%v)", err)
	}
	rel := file
	if pathPart != "" {
		if strings.HasPrefix(pathPart, "/") {
			rel = strings.TrimPrefix(pathPart, "/") // GitHub: from the repository's root
		} else {
			rel = filepath.ToSlash(filepath.Join(filepath.Dir(filepath.FromSlash(file)), filepath.FromSlash(pathPart)))
		}
		rel = filepath.ToSlash(filepath.Clean(filepath.FromSlash(rel)))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return rel + " is outside the repository"
		}
		info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
		if errors.Is(err, fs.ErrNotExist) {
			return rel + " does not exist"
		}
		if err != nil {
			return err.Error()
		}
		if anchor != "" && (info.IsDir() || !strings.HasSuffix(rel, ".md")) {
			return fmt.Sprintf("anchor #%s on %s, which is not a Markdown page", anchor, rel)
		}
	}
	if anchor == "" {
		return ""
	}
	p, err := load(rel)
	if err != nil {
		return err.Error()
	}
	if !p.anchors[anchor] {
		return fmt.Sprintf("no heading with anchor #%s in %s", anchor, rel)
	}
	return ""
}

package layout

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// Every relative link in every README (and other Markdown file) of the repository leads somewhere: the
// file or directory exists, and an #anchor names a heading of the file it points into, as GitHub makes
// heading anchors. Links to other sites are not followed (nothing outside this machine is reachable).
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs := markdownFiles(t, root)
	if len(docs) < 5 {
		t.Fatalf("found %d Markdown files under %s: the walk is wrong", len(docs), root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(t, path)
		anchors[path] = a
		return a
	}
	checked := 0
	for _, doc := range docs {
		for _, l := range markdownLinks(t, doc) {
			checked++
			target, frag, _ := strings.Cut(l.target, "#")
			dest := doc
			if target != "" {
				p, err := url.PathUnescape(target)
				if err != nil {
					t.Errorf("%s:%d: link %q: %v", rel(root, doc), l.line, l.target, err)
					continue
				}
				if strings.HasPrefix(p, "/") {
					dest = filepath.Join(root, p)
				} else {
					dest = filepath.Join(filepath.Dir(doc), p)
				}
				fi, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %q: no such file or directory %s", rel(root, doc), l.line, l.target, rel(root, dest))
					continue
				}
				if fi.IsDir() || frag == "" {
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				continue // a line anchor into source (#L10) is GitHub's, not a heading
			}
			if !anchorsOf(dest)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel(root, doc), l.line, l.target, rel(root, dest), frag)
			}
		}
	}
	t.Logf("%d Markdown files, %d relative links checked", len(docs), checked)
}

// The anchors are made as GitHub makes them; the cases are headings this repository has.
func TestHeadingAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"A whole cluster on the fakes":                                 "a-whole-cluster-on-the-fakes",
		"`harness cluster up`: a whole cluster on the fakes":           "harness-cluster-up-a-whole-cluster-on-the-fakes",
		"`harness ui`: the live boundary view in a browser":            "harness-ui-the-live-boundary-view-in-a-browser",
		"Processes: the simulation plugged in":                         "processes-the-simulation-plugged-in",
		"What is simulated, and what is not":                           "what-is-simulated-and-what-is-not",
		"Unit tests of CRI and CSI clients, beside the upstream fakes": "unit-tests-of-cri-and-csi-clients-beside-the-upstream-fakes",
		"cri-fake → runc":                                              "cri-fake--runc",
		"Kill -9, 300 rounds":                                          "kill--9-300-rounds",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

type link struct {
	target string
	line   int
}

var (
	// [text](target) and ![alt](target), the target up to the first space (a title may follow).
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+"[^"]*")?\)`)
	// [label]: target
	refLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(\s|$)`)
	heading = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	scheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// markdownLinks lists the relative links of a Markdown file outside code (fenced blocks and `spans`).
func markdownLinks(t *testing.T, path string) []link {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []link
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fence := ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		line = stripCodeSpans(line)
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, tg := range targets {
			if scheme.MatchString(tg) || strings.HasPrefix(tg, "//") {
				continue // another site, mailto:, …
			}
			out = append(out, link{target: tg, line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// stripCodeSpans blanks `code spans`, where brackets are text, not links.
func stripCodeSpans(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			b.WriteRune(' ')
			continue
		}
		if in {
			b.WriteRune(' ')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors of a Markdown file's headings (outside fenced code), with
// GitHub's -1, -2 … for repeats, and any explicit <a name|id="…"> anchors.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	explicit := regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range explicit.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := anchor(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchor is GitHub's anchor of a heading: its text without Markdown's code, emphasis and link syntax,
// lower case, every character but letters, digits, spaces, hyphens and underscores dropped, spaces
// turned into hyphens.
func anchor(h string) string {
	h = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

package layering_test

import (
	"fmt"
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

// module is the import path prefix of every imledger package.
const module = "github.com/imledger/imledger"

// layers are the top-level directories that hold the application's layers.
// internal/* packages are shared plumbing and may import none of them.
var layers = []string{"domain", "commands", "readmodels", "projections", "transport"}

// rule is one arrow that must not exist: a package under from may not import
// an import path for which forbidden returns a reason.
type rule struct {
	name      string
	applies   func(pkg string) bool
	forbidden func(imp string) bool
}

func under(dir string) func(string) bool {
	return func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
}

func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func project(imp string) (string, bool) {
	if imp == module {
		return "", true
	}
	return strings.CutPrefix(imp, module+"/")
}

var rules = []rule{
	{
		name:    "domain imports only the standard library and github.com/google/uuid",
		applies: under("domain"),
		forbidden: func(imp string) bool {
			if rel, ok := project(imp); ok {
				return !under("domain")(rel)
			}
			return !isStdlib(imp) && imp != "github.com/google/uuid"
		},
	},
	{
		name:    "commands/** never imports transport/**",
		applies: under("commands"),
		forbidden: func(imp string) bool {
			rel, ok := project(imp)
			return ok && under("transport")(rel)
		},
	},
	{
		name:    "readmodels/** never imports commands/**",
		applies: under("readmodels"),
		forbidden: func(imp string) bool {
			rel, ok := project(imp)
			return ok && under("commands")(rel)
		},
	},
	{
		name:    "projections/** never imports commands/**",
		applies: under("projections"),
		forbidden: func(imp string) bool {
			rel, ok := project(imp)
			return ok && under("commands")(rel)
		},
	},
	{
		name:    "internal/* imports no layer package (domain, commands, readmodels, projections, transport)",
		applies: under("internal"),
		forbidden: func(imp string) bool {
			rel, ok := project(imp)
			if !ok {
				return false
			}
			for _, l := range layers {
				if under(l)(rel) {
					return true
				}
			}
			return false
		},
	},
}

// exemption lets the files of one package's external tests (package x_test) import one
// package a rule forbids. An external test is a client of x, like cmd/imledger: where x reaches
// an adapter only through a port, the test may wire the real adapter in, as the composition
// root does. Internal test files (package x) and production files never get one. Each exemption
// must be used, so a stale one fails the test.
type exemption struct {
	pkg, imp, why string
}

var exemptions = []exemption{
	{
		pkg: "projections",
		imp: module + "/commands/eventstore",
		why: "rebuild and verify are tested against a real event log; projections reads it only through its EventReader port, which the test fills with the store as cmd/imledger does",
	},
}

// importEdge is one import statement of one file.
type importEdge struct {
	pkg   string // package directory relative to the module root
	file  string // file path relative to the module root
	imp   string // the imported path
	xtest bool   // the file belongs to an external test package (package x_test)
}

// TestLayering parses the import block of every .go file in the module, test
// files included: a test that reaches across a layer couples the layers just as
// production code does (a helper in internal/testenv that builds an event
// store ties every test that uses it to commands), so the rules make no
// exception for _test.go files. Directories named testdata, vendor or starting
// with "." or "_" are skipped, as the go tool skips them.
//
// The one exception is the exemptions table above: an external test package
// may wire a real adapter behind a port, as the composition root does, and
// each such import is named with its reason.
//
// On failure the message names every offending import with its file and rule,
// then lists every import the test checked, so a reader sees both what broke
// and what was looked at.
func TestLayering(t *testing.T) {
	root := moduleRoot(t)
	edges := collectImports(t, root)
	if len(edges) == 0 {
		t.Fatalf("no imports found under %s: the walk is broken", root)
	}

	var violations, exempted []string
	used := map[exemption]bool{}
	checked := map[string]map[string]bool{} // pkg → import → any rule applied
	for _, e := range edges {
		if checked[e.pkg] == nil {
			checked[e.pkg] = map[string]bool{}
		}
		for _, r := range rules {
			if !r.applies(e.pkg) {
				continue
			}
			checked[e.pkg][e.imp] = true
			if !r.forbidden(e.imp) {
				continue
			}
			if ex, ok := exempt(e); ok {
				used[ex] = true
				exempted = append(exempted, fmt.Sprintf("%s imports %q (%s): exempt, %s", e.pkg, e.imp, e.file, ex.why))
				continue
			}
			violations = append(violations, fmt.Sprintf("%s imports %q (%s): breaks %q", e.pkg, e.imp, e.file, r.name))
		}
	}

	for _, ex := range exemptions {
		if !used[ex] {
			violations = append(violations, fmt.Sprintf("exemption for %s importing %q is unused: delete it", ex.pkg, ex.imp))
		}
	}
	sort.Strings(exempted)
	list := checkedList(checked)
	if len(exempted) > 0 {
		list += "\nexempted external-test imports:\n  " + strings.Join(exempted, "\n  ") + "\n"
	}
	if len(violations) > 0 {
		sort.Strings(violations)
		t.Fatalf("%d import(s) break the layering:\n  %s\n\nimports checked (%d edges in %d packages under a rule):\n%s",
			len(violations), strings.Join(violations, "\n  "), countEdges(checked), countPkgs(checked), list)
	}
	t.Logf("layering holds; imports checked (%d edges in %d packages under a rule):\n%s",
		countEdges(checked), countPkgs(checked), list)
}

// TestRulesCatchKnownViolations guards the rules themselves: each sample
// import must be refused, each allowed import accepted.
func TestRulesCatchKnownViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pkg, imp string
		want     bool
	}{
		{"domain", "github.com/jackc/pgx/v5", false},
		{"domain", module + "/internal/jsonschema", false},
		{"domain", "github.com/google/uuid", true},
		{"domain/schemas", "encoding/json", true},
		{"commands/account", module + "/transport/auth", false},
		{"commands/account", module + "/domain", true},
		{"readmodels/business", module + "/commands/eventstore", false},
		{"projections", module + "/commands/eventstore", false},
		{"projections", module + "/readmodels/hot", true},
		{"internal/config", module + "/transport/ws", false},
		{"internal/testenv", module + "/domain", false},
		{"internal/testenv", "github.com/jackc/pgx/v5", true},
		{"transport/rest", module + "/commands", true},
	}
	for _, c := range cases {
		ok := true
		for _, r := range rules {
			if r.applies(c.pkg) && r.forbidden(c.imp) {
				ok = false
			}
		}
		if ok != c.want {
			t.Errorf("%s importing %s: allowed=%v, want %v", c.pkg, c.imp, ok, c.want)
		}
	}
}

func exempt(e importEdge) (exemption, bool) {
	if !e.xtest {
		return exemption{}, false
	}
	for _, ex := range exemptions {
		if ex.pkg == e.pkg && ex.imp == e.imp {
			return ex, true
		}
	}
	return exemption{}, false
}

// TestExemptionsCoverOnlyExternalTests guards the exemption table: the same
// import from an internal test file or production file of the package is not
// exempt.
func TestExemptionsCoverOnlyExternalTests(t *testing.T) {
	t.Parallel()
	for _, ex := range exemptions {
		if _, ok := exempt(importEdge{pkg: ex.pkg, imp: ex.imp, file: ex.pkg + "/x_test.go", xtest: true}); !ok {
			t.Errorf("exemption %s → %s does not apply to an external test", ex.pkg, ex.imp)
		}
		if _, ok := exempt(importEdge{pkg: ex.pkg, imp: ex.imp, file: ex.pkg + "/x.go"}); ok {
			t.Errorf("exemption %s → %s applies to a production file", ex.pkg, ex.imp)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if !strings.Contains(string(data), "module "+module) {
				t.Fatalf("%s/go.mod is not module %s", dir, module)
			}
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test directory")
		}
		dir = parent
	}
}

func collectImports(t *testing.T, root string) []importEdge {
	t.Helper()
	var edges []importEdge
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		xtest := strings.HasSuffix(name, "_test.go") && strings.HasSuffix(f.Name.Name, "_test")
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, spec.Path.Value, err)
			}
			edges = append(edges, importEdge{pkg: pkg, file: filepath.ToSlash(rel), imp: imp, xtest: xtest})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return edges
}

func checkedList(checked map[string]map[string]bool) string {
	pkgs := make([]string, 0, len(checked))
	for p, imps := range checked {
		if len(imps) > 0 {
			pkgs = append(pkgs, p)
		}
	}
	sort.Strings(pkgs)
	var b strings.Builder
	for _, p := range pkgs {
		imps := make([]string, 0, len(checked[p]))
		for i := range checked[p] {
			imps = append(imps, i)
		}
		sort.Strings(imps)
		fmt.Fprintf(&b, "  %s:\n", p)
		for _, i := range imps {
			fmt.Fprintf(&b, "    %s\n", i)
		}
	}
	return b.String()
}

func countEdges(checked map[string]map[string]bool) int {
	n := 0
	for _, imps := range checked {
		n += len(imps)
	}
	return n
}

func countPkgs(checked map[string]map[string]bool) int {
	n := 0
	for _, imps := range checked {
		if len(imps) > 0 {
			n++
		}
	}
	return n
}

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

// allowance is what the files of one top-level folder may import from the rest of the module,
// beyond their own folder: prod for every file, test in addition for _test.go files. An entry
// names a folder and everything below it ("readmodels") or one package subtree
// ("readmodels/tokendb").
type allowance struct {
	prod, test []string
}

// allowed is the table of arrows, one row per top-level folder of the module. A folder missing
// from it fails the test: a new folder states its place. Within its own folder a package may
// import any other. internal/testenv is further restricted (see testOnly).
var allowed = map[string]allowance{
	// The model: no project import at all; its third-party rule is domainThirdParty.
	"domain": {},
	// Shared plumbing below every layer.
	"internal":   {},
	"migrations": {test: []string{"internal"}},
	"readmodels": {prod: []string{"domain", "internal", "migrations"}},
	"projections": {prod: []string{"domain", "readmodels", "internal", "migrations"},
		// A projection's tests check what it built against a rebuild from a real event log
		// (replay, reading the event store behind its EventReader port as cmd/imledger wires
		// it); the projector benchmark runs from its tests too.
		test: []string{"commands/eventstore", "replay", "cmd/imledger/bench/projectionbench"}},
	// commands/actiontoken reads the action-token read model it keeps in step (readmodels/tokendb);
	// tests of a command look at the read models it changes, and the admin plane's test reads the
	// analysts' export back to find no secret in it.
	"commands": {prod: []string{"domain", "internal", "migrations", "readmodels/tokendb"},
		test: []string{"readmodels", "replay/export", "cmd/imledger/bench/writebench"}},
	// What reads the committed log back: rebuilds and verifications read the events each
	// projection accepts and fold them into the read models' stores (projections, readmodels);
	// export and republish scan the event store's commit-safe order (commands/eventstore) and
	// republish builds records as the relay does (commands/relay). Their tests write a tenant's
	// history through the real command handlers.
	"replay": {prod: []string{"domain", "readmodels", "projections", "internal", "commands/eventstore", "commands/relay"},
		test: []string{"commands/storetest", "commands/scenariotest"}},
	"transport": {prod: []string{"domain", "commands", "readmodels", "internal"},
		test: []string{"projections", "migrations"}},
	// The composition root, the CLI and the benchmarks (cmd/imledger/bench) wire everything.
	"cmd": {prod: []string{"domain", "commands", "readmodels", "projections", "replay", "transport", "internal", "migrations"}},
}

// testOnly: internal/testenv starts and isolates stores for tests; production code never
// imports it. Test-helper packages (whose name ends in "test": commands/storetest,
// readmodels/internal/rmtest) count as tests.
const testOnly = "internal/testenv"

// domainThirdParty is the one module outside the standard library that domain may import.
const domainThirdParty = "github.com/google/uuid"

type importEdge struct {
	pkg  string // package directory relative to the module root
	file string // file path relative to the module root
	imp  string // the imported path
	test bool   // the file is a _test.go file or belongs to a test-helper package
}

func topFolder(rel string) string {
	first, _, _ := strings.Cut(rel, "/")
	return first
}

func under(dir, p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func isStdlib(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// check returns why e breaks the table, or "".
func check(e importEdge) string {
	top := topFolder(e.pkg)
	row, ok := allowed[top]
	if !ok {
		return fmt.Sprintf("top-level folder %s has no row in the allowed-imports table", top)
	}
	rel, ours := strings.CutPrefix(e.imp, module+"/")
	if !ours {
		if top == "domain" && !isStdlib(e.imp) && e.imp != domainThirdParty {
			return "domain imports only the standard library and " + domainThirdParty
		}
		return ""
	}
	if under(testOnly, rel) && !e.test {
		return testOnly + " is for tests and test-helper packages only"
	}
	if topFolder(rel) == top {
		return ""
	}
	for _, a := range row.prod {
		if under(a, rel) {
			return ""
		}
	}
	if e.test {
		for _, a := range row.test {
			if under(a, rel) {
				return ""
			}
		}
	}
	kind := "production code"
	if e.test {
		kind = "tests"
	}
	return fmt.Sprintf("%s of %s may import %s (tests also %s)", kind, top, list(row.prod), list(row.test))
}

func list(s []string) string {
	if len(s) == 0 {
		return "nothing of the module"
	}
	return strings.Join(s, ", ")
}

// TestLayering parses the import block of every .go file in the module, test files included (a
// test that reaches across a layer couples the layers just as production code does), and checks
// each project import against the table above. Directories named testdata, vendor or starting
// with "." or "_" are skipped, as the go tool skips them. Every row and every entry of the table
// must be used, so a stale allowance fails too.
func TestLayering(t *testing.T) {
	root := moduleRoot(t)
	edges := collectImports(t, root)
	if len(edges) < 1000 {
		t.Fatalf("only %d imports found under %s: the walk is broken", len(edges), root)
	}
	var violations []string
	used := map[string]bool{}
	for _, e := range edges {
		if why := check(e); why != "" {
			violations = append(violations, fmt.Sprintf("%s imports %q: %s", e.file, e.imp, why))
			continue
		}
		used[topFolder(e.pkg)] = true
		if rel, ok := strings.CutPrefix(e.imp, module+"/"); ok {
			used[topFolder(e.pkg)+" → "+allowanceFor(e, rel)] = true
		}
	}
	for top, row := range allowed {
		if !used[top] {
			violations = append(violations, fmt.Sprintf("the table has a row for %s, which holds no Go file", top))
		}
		for _, a := range append(append([]string{}, row.prod...), row.test...) {
			if !used[top+" → "+a] {
				violations = append(violations, fmt.Sprintf("%s may import %s, but nothing there does: drop the entry", top, a))
			}
		}
	}
	if len(violations) > 0 {
		sort.Strings(violations)
		t.Fatalf("%d import(s) break the allowed-imports table:\n  %s", len(violations), strings.Join(violations, "\n  "))
	}
	t.Logf("%d imports of %d files checked against the table", len(edges), countFiles(edges))
}

// allowanceFor names the table entry that allowed e's import of rel ("" within the folder).
func allowanceFor(e importEdge, rel string) string {
	row := allowed[topFolder(e.pkg)]
	for _, a := range append(append([]string{}, row.prod...), row.test...) {
		if under(a, rel) {
			return a
		}
	}
	return ""
}

// TestTableCatchesKnownViolations guards the table itself: each sample import must be refused,
// each allowed import accepted.
func TestTableCatchesKnownViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pkg, imp string
		test     bool
		want     bool
	}{
		{"domain", "github.com/jackc/pgx/v5", false, false},
		{"domain", module + "/internal/jsonschema", false, false},
		{"domain", "github.com/google/uuid", false, true},
		{"domain/schemas", "encoding/json", false, true},
		{"commands/account", module + "/transport/auth", false, false},
		{"commands/account", module + "/transport/auth", true, false},
		{"commands/account", module + "/domain", false, true},
		{"commands/account", module + "/readmodels/business", false, false},
		{"commands/actiontoken", module + "/readmodels/tokendb", false, true},
		{"readmodels/business", module + "/commands/eventstore", false, false},
		{"projections", module + "/commands/eventstore", false, false},
		{"projections", module + "/commands/eventstore", true, true},
		{"projections", module + "/readmodels/hot", false, true},
		{"internal/kafka", module + "/transport/ws", false, false},
		{"internal/testenv", module + "/domain", false, false},
		{"internal/testenv", "github.com/jackc/pgx/v5", false, true},
		{"transport/rest", module + "/commands/message", false, true},
		{"transport/rest", module + "/internal/testenv", false, false},
		{"transport/rest", module + "/internal/testenv", true, true},
		{"transport/rest", module + "/cmd/imledger", true, false},
		{"replay/export", module + "/commands/eventstore", false, true},
		{"replay", module + "/commands/account", false, false},
		{"replay", module + "/projections", false, true},
		{"projections", module + "/replay", false, false},
		{"replay/republish", module + "/transport/ws", true, false},
		{"newfolder/x", module + "/domain", false, false},
	}
	for _, c := range cases {
		why := check(importEdge{pkg: c.pkg, imp: c.imp, test: c.test, file: c.pkg + "/x.go"})
		if (why == "") != c.want {
			t.Errorf("%s importing %s (test %v): allowed=%v (%s), want %v", c.pkg, c.imp, c.test, why == "", why, c.want)
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

// walkGo calls fn for every .go file of the module, skipping what the go tool skips.
func walkGo(t *testing.T, root string, fn func(path, rel string) error) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || name == "node_modules" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		return fn(path, filepath.ToSlash(rel))
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
}

func collectImports(t *testing.T, root string) []importEdge {
	t.Helper()
	var edges []importEdge
	fset := token.NewFileSet()
	walkGo(t, root, func(path, rel string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		test := strings.HasSuffix(rel, "_test.go") || strings.HasSuffix(filepath.Base(pkg), "test")
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, spec.Path.Value, err)
			}
			edges = append(edges, importEdge{pkg: pkg, file: rel, imp: imp, test: test})
		}
		return nil
	})
	return edges
}

func countFiles(edges []importEdge) int {
	files := map[string]bool{}
	for _, e := range edges {
		files[e.file] = true
	}
	return len(files)
}

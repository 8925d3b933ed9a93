package layering_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strings"
	"testing"
)

// Ceilings of a function: lines from its signature to its closing brace, and cyclomatic
// complexity (1 + each if, for, range, case, comm clause, && and ||). Production code and tests
// have their own line ceilings: a test's setup is long by nature, but a test that long tests
// more than one thing.
const (
	maxLines     = 80
	maxTestLines = 160
	maxBranches  = 25
)

// size is a function's lines and complexity.
type size struct{ lines, branches int }

// longFunctions are the functions over a ceiling that predate it, with the size they may not
// exceed. The list only shrinks: a function that grows past its entry, or a new function over a
// ceiling, fails; an entry whose function is back under the ceilings fails too, so the list stays
// true.
var longFunctions = map[string]size{}

// TestFunctionSizes keeps functions short enough to read at once. Complexity is checked in
// production code only: a test's error checks are branches that do not branch its story.
func TestFunctionSizes(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var over []string
	seen := map[string]bool{}
	n := 0
	walkGo(t, root, func(path, rel string) error {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		test := strings.HasSuffix(rel, "_test.go")
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n++
			got := size{fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Pos()).Line + 1, complexity(fd.Body)}
			limit := size{maxLines, maxBranches}
			if test {
				limit = size{maxTestLines, 0}
				got.branches = 0
			}
			key := rel + ":" + funcName(fd)
			within := got.lines <= limit.lines && got.branches <= limit.branches
			if allowed, ok := longFunctions[key]; ok {
				seen[key] = true
				if within {
					over = append(over, fmt.Sprintf("%s is within the ceilings now (%+v): drop its entry", key, got))
				} else if got.lines > max(allowed.lines, limit.lines) || got.branches > max(allowed.branches, limit.branches) {
					over = append(over, fmt.Sprintf("%s grew to %+v (its entry allows %+v)", key, got, allowed))
				}
				continue
			}
			if !within {
				over = append(over, fmt.Sprintf("%s: %d lines, complexity %d (at most %d and %d)", key, got.lines,
					got.branches, limit.lines, limit.branches))
			}
		}
		return nil
	})
	for key := range longFunctions {
		if !seen[key] {
			over = append(over, fmt.Sprintf("%s is listed but no longer exists: drop its entry", key))
		}
	}
	if n < 3000 {
		t.Fatalf("only %d functions found: the walk is broken", n)
	}
	if len(over) > 0 {
		sort.Strings(over)
		t.Fatalf("%d function(s) over a ceiling: split them\n  %s", len(over), strings.Join(over, "\n  "))
	}
	t.Logf("%d functions within the ceilings (%d listed as older exceptions)", n, len(longFunctions))
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	var b strings.Builder
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.Ident:
		b.WriteString(x.Name)
	case *ast.IndexExpr:
		b.WriteString(fmt.Sprint(x.X))
	case *ast.IndexListExpr:
		b.WriteString(fmt.Sprint(x.X))
	}
	return b.String() + "." + fd.Name.Name
}

// complexity is the cyclomatic complexity of body: 1 + its decision points. Function literals
// inside count toward the function that holds them.
func complexity(body *ast.BlockStmt) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

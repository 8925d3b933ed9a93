package export

import (
	"fmt"
	"path"
	"strings"

	"github.com/imledger/imledger/domain"
)

// SelectTypes returns the stored type names whose events an export with these globs reads: each
// registered type that a glob matches by its own name or, when upcast, by the name of its current
// version (so "member.muted.v2" also selects the v1 events that are exported as v2). Globs are
// path.Match patterns; a bad pattern, or one that matches no registered type, is an error wrapping
// domain.ErrInvalid. No globs select every type (nil).
func SelectTypes(globs []string, upcast bool) ([]domain.EventType, error) {
	if len(globs) == 0 {
		return nil, nil
	}
	var out []domain.EventType
	seen := map[domain.EventType]bool{}
	for _, g := range globs {
		g = strings.TrimSpace(g)
		matched := false
		for _, info := range domain.EventTypes() {
			names := []domain.EventType{info.Type}
			if upcast {
				names = append(names, domain.CurrentType(info.Type))
			}
			for _, n := range names {
				ok, err := path.Match(g, string(n))
				if err != nil {
					return nil, fmt.Errorf("export: type glob %q: %w", g,
						&domain.ValidationError{Field: "types", Reason: "bad_format", Detail: err.Error()})
				}
				if ok {
					matched = true
					if !seen[info.Type] {
						seen[info.Type] = true
						out = append(out, info.Type)
					}
					break
				}
			}
		}
		if !matched {
			return nil, fmt.Errorf("export: type glob %q: %w", g,
				&domain.ValidationError{Field: "types", Reason: "unknown", Detail: "matches no event type"})
		}
	}
	return out, nil
}

package tableset_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/imledger/imledger/readmodels/internal/tableset"
)

func TestValidateAcceptsDistinctPlainNames(t *testing.T) {
	t.Parallel()
	if err := tableset.Validate("pkg", []string{"im_a", "im_B_rebuild", strings.Repeat("x", 60)}); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRejectsBadNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "im-a", "im_a`; DROP TABLE im_b", "im a", strings.Repeat("x", 61)} {
		err := tableset.Validate("pkg", []string{"im_ok", name})
		if err == nil || err.Error() != fmt.Sprintf("pkg: bad table name %q", name) {
			t.Errorf("Validate(%q) = %v, want a bad-name error prefixed pkg:", name, err)
		}
	}
}

func TestValidateRejectsANameUsedTwiceIgnoringCase(t *testing.T) {
	t.Parallel()
	err := tableset.Validate("pkg", []string{"im_users", "im_groups", "IM_Users"})
	if err == nil || err.Error() != `pkg: table name "IM_Users" used twice` {
		t.Fatalf("got %v, want the second spelling reported as used twice", err)
	}
}

func TestPlaceholders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		got, want string
	}{
		{tableset.Placeholders(1), "?"},
		{tableset.Placeholders(3), "?, ?, ?"},
		{tableset.RowPlaceholders(1, 2), "(?, ?)"},
		{tableset.RowPlaceholders(2, 3), "(?, ?, ?), (?, ?, ?)"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

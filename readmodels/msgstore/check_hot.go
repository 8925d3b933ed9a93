package msgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// HotCheck describes a page a cache could serve: the seq span it covers and what the cache holds
// in that span.
type HotCheck struct {
	Topic  domain.Topic
	Viewer domain.UserID // whose delete-for-me rows count; 0 for nobody's
	From   int64         // first seq of the span, inclusive
	To     int64         // last seq of the span, inclusive
	Seqs   []int64       // the seqs the cache holds in the span, messages and seq-skip markers
	Live   []int64       // those of Seqs the cache holds as not recalled
	// Versions are the content versions the cache holds for Live, one each; nil compares none.
	Versions []int64
	// Beyond is the seq of the cached message just past the page (0 if none), which tells the
	// reader there is more; the viewer's deletions are counted up to it too, so a deleted one
	// cannot make a page claim more than there is.
	Beyond int64
}

// HotCheckResult is what MySQL says about a HotCheck.
type HotCheckResult struct {
	Missing   int64 // messages or markers in the span the cache does not hold
	Recalled  int64 // messages of Live that MySQL has as recalled or at a newer version than Versions (the cache is behind), or blocked (content MySQL refused, which the cache must not show either)
	Deleted   int64 // the viewer's delete-for-me rows in the span
	Watermark int64 // the topic's watermark in MySQL (see Store.Watermark)
}

// OK reports whether the cache's page is complete and shows nothing MySQL hides.
func (r HotCheckResult) OK() bool { return r.Missing == 0 && r.Recalled == 0 && r.Deleted == 0 }

// CheckHot answers, in one round trip of indexed lookups, whether a page a cache holds may be
// served as it is: MySQL holds nothing in the span the cache lacks, no message in it was recalled
// or edited behind the cache's back or holds content MySQL refused (status blocked: the page is
// then read from MySQL, which shows the placeholder), and the viewer deleted none of it; it also
// returns the topic's watermark. It sends no message content back, which is what makes a cached
// page cheaper than reading the page from MySQL. A seq that neither holds is not confirmed as a
// hole: only a seq-skip marker makes one final, and the caller must see it in the cache.
func (s *Store) CheckHot(ctx context.Context, tenant domain.TenantID, tables Tables, c HotCheck) (HotCheckResult, error) {
	var res HotCheckResult
	if c.Topic.IsZero() || c.From < 1 || c.To < c.From {
		return res, fmt.Errorf("check hot page: topic and a seq span are required: %w", domain.ErrInvalid)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return res, fmt.Errorf("check hot page: %w", err)
	}
	table := q(messageTable(tables, c.Topic))
	topic := c.Topic.String()

	missing := "SELECT COUNT(*) FROM " + table + " WHERE topic = ? AND seqid BETWEEN ? AND ?"
	args := []any{topic, c.From, c.To}
	if len(c.Seqs) > 0 {
		missing += " AND seqid NOT IN (" + tableset.Placeholders(len(c.Seqs)) + ")"
		args = appendInt64s(args, c.Seqs)
	}
	recalled := "0"
	if len(c.Live) > 0 {
		changed := "status IN ('recalled', 'blocked')"
		var versions []any
		if len(c.Versions) == len(c.Live) {
			// An edit the cache has not applied yet: MySQL holds a newer version.
			changed = "(" + changed + " OR version > CASE seqid" + strings.Repeat(" WHEN ? THEN ?", len(c.Live)) + " END)"
			for i, seq := range c.Live {
				versions = append(versions, seq, c.Versions[i])
			}
		}
		if c.Topic.Kind() == domain.TopicGroup {
			// uk_im_group_messages_group_seq finds the rows.
			recalled = "SELECT COUNT(*) FROM " + table + " WHERE group_id = ? AND " + changed + " AND seqid IN (" + tableset.Placeholders(len(c.Live)) + ")"
			args = append(args, c.Topic.GroupID())
		} else {
			recalled = "SELECT COUNT(*) FROM " + table + " WHERE topic = ? AND " + changed + " AND seqid IN (" + tableset.Placeholders(len(c.Live)) + ")"
			args = append(args, topic)
		}
		args = append(args, versions...)
		args = appendInt64s(args, c.Live)
	}
	deleted := "0"
	if c.Viewer > 0 {
		from, to := c.From, c.To
		if c.Beyond > 0 {
			from, to = min(from, c.Beyond), max(to, c.Beyond)
		}
		deleted = "SELECT COUNT(*) FROM " + q(tables.Deletions) + " WHERE user_id = ? AND topic = ? AND seqid BETWEEN ? AND ?"
		args = append(args, c.Viewer.Int64(), topic, from, to)
	}
	stmt := "SELECT (" + missing + "), (" + recalled + "), (" + deleted + "), COALESCE((SELECT watermark FROM " +
		q(tables.Watermarks) + " WHERE topic = ?), 0)"
	args = append(args, topic)
	if err := db.QueryRowContext(ctx, stmt, args...).Scan(&res.Missing, &res.Recalled, &res.Deleted, &res.Watermark); err != nil {
		return res, tenantdb.WrapErr("check hot page", err)
	}
	return res, nil
}

func appendInt64s(args []any, xs []int64) []any {
	for _, x := range xs {
		args = append(args, x)
	}
	return args
}

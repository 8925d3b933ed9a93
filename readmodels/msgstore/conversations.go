package msgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// seqTimesChunk bounds the (topic, seq) pairs of one SeqTimes statement.
const seqTimesChunk = 200

// SeqTimes returns, for each topic of at, the time the newest row at or below its seq was written
// (a message's sent time, a seq-skip marker's time), keyed by topic name: the row at the seq
// itself once this read model holds it, an older one while it trails the seq (another read model
// raised the watermark first). Topics whose seq is 0 or without such a row are left out. Each
// topic is one descending dive into the (topic, seqid) unique key.
func (s *Store) SeqTimes(ctx context.Context, tenant domain.TenantID, tables Tables, at map[domain.Topic]int64) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(at))
	byTable := map[string][]any{}
	for t, seq := range at {
		if seq <= 0 {
			continue
		}
		table := messageTable(tables, t)
		byTable[table] = append(byTable[table], t.String(), seq)
	}
	if len(byTable) == 0 {
		return out, nil
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return nil, fmt.Errorf("seq times: %w", err)
	}
	for table, args := range byTable {
		for start := 0; start < len(args); start += 2 * seqTimesChunk {
			chunk := args[start:min(start+2*seqTimesChunk, len(args))]
			one := "(SELECT topic, created_at FROM " + q(table) + " WHERE topic = ? AND seqid <= ? ORDER BY seqid DESC LIMIT 1)"
			stmt := strings.TrimSuffix(strings.Repeat(one+" UNION ALL ", len(chunk)/2), " UNION ALL ")
			rows, err := db.QueryContext(ctx, stmt, chunk...)
			if err != nil {
				return nil, tenantdb.WrapErr("seq times", err)
			}
			for rows.Next() {
				var topic string
				var ts time.Time
				if err := rows.Scan(&topic, &ts); err != nil {
					rows.Close()
					return nil, tenantdb.WrapErr("seq times", err)
				}
				out[topic] = ts.UTC()
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, tenantdb.WrapErr("seq times", err)
			}
		}
	}
	return out, nil
}

// MentionCount counts the messages of topic with a seq in (after, upTo] that mention user, by
// id or as a mention of all, sent by someone else, neither recalled nor deleted by user for
// themselves. It reads the (topic, seqid) index range of the span only.
func (s *Store) MentionCount(ctx context.Context, tenant domain.TenantID, tables Tables, topic domain.Topic, user domain.UserID, after, upTo int64) (int64, error) {
	if upTo <= after {
		return 0, nil
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return 0, fmt.Errorf("mention count: %w", err)
	}
	var n int64
	err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q(messageTable(tables, topic))+" m"+
		" WHERE m.topic = ? AND m.seqid > ? AND m.seqid <= ? AND m.status = '"+readmodels.StatusNormal+"'"+
		" AND m.from_user <> ? AND (m.mention_all = 1 OR JSON_CONTAINS(m.mentioned_user_ids, ?))"+
		" AND NOT EXISTS (SELECT 1 FROM "+q(tables.Deletions)+" d WHERE d.user_id = ? AND d.topic = m.topic AND d.seqid = m.seqid)",
		topic.String(), after, upTo, user.Int64(), user.String(), user.Int64()).Scan(&n)
	if err != nil {
		return 0, tenantdb.WrapErr("mention count", err)
	}
	return n, nil
}

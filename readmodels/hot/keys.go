package hot

import (
	"strconv"

	"github.com/imledger/imledger/domain"
)

// Key layout (seed 000 §5.4). The braces are Redis Cluster hash tags: all keys of one topic share
// a slot, so one script may touch them together.
//
//	<prefix><tenant>:topic:{<topic>}:hot_msg_seqs   zset, member and score = seq
//	<prefix><tenant>:topic:{<topic>}:hot_msg:<seq>  hash, the snapshot (see snapshot.go)
//	<prefix><tenant>:topic:{<topic>}:proj_last_seq  string, highest projected seq
//	<prefix><tenant>:topic:{<topic>}:proj_wm        hash, the watermark (w) and bitmap base (b)
//	<prefix><tenant>:topic:{<topic>}:proj_seen      bitmap of the seqs in place above the base
//	<prefix><tenant>:user:{<uid>}:read_marks        hash, topic -> read seq

func (s *Store) topicBase(tenant domain.TenantID, topic string) string {
	return s.cfg.Prefix + tenant.String() + ":topic:{" + topic + "}:"
}

func (s *Store) seqsKey(tenant domain.TenantID, topic string) string {
	return s.topicBase(tenant, topic) + "hot_msg_seqs"
}

func (s *Store) msgKey(tenant domain.TenantID, topic string, seq int64) string {
	return s.topicBase(tenant, topic) + "hot_msg:" + strconv.FormatInt(seq, 10)
}

func (s *Store) lastSeqKey(tenant domain.TenantID, topic string) string {
	return s.topicBase(tenant, topic) + "proj_last_seq"
}

func (s *Store) watermarkKey(tenant domain.TenantID, topic string) string {
	return s.topicBase(tenant, topic) + "proj_wm"
}

func (s *Store) seenKey(tenant domain.TenantID, topic string) string {
	return s.topicBase(tenant, topic) + "proj_seen"
}

func (s *Store) readMarksKey(tenant domain.TenantID, user domain.UserID) string {
	return s.cfg.Prefix + tenant.String() + ":user:{" + user.String() + "}:read_marks"
}

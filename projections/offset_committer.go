package projections

import (
	"errors"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
)

// offsetCommitter commits the offsets a consumer group member marked soon after they are marked,
// over a Kafka connection of its own.
//
// Sarama's own commits go to the group coordinator over the connection its fetches use, and a
// Sarama broker connection answers one request at a time: a commit waits behind the fetch in
// flight, which the broker holds for up to the fetch's MaxWaitTime when no record comes (two
// seconds for the projectors of the quiet topics). Right after a burst the projector has applied
// everything within milliseconds, then fetches again and waits, and its offsets reach Kafka only
// when that fetch returns: the group looks seconds behind to every lag check and to operators'
// tools although its read model is current. The committer's connection carries only commits.
//
// Sarama's auto-commit stays on, and Sarama still commits the marked offsets when a session ends:
// the committer only makes them visible earlier. A commit of a member whose session has ended is
// refused by the coordinator (its generation is stale), so the committer cannot move another
// member's offsets. Its commits are best effort: a failed one is dropped and the next mark, or
// Sarama's auto-commit, commits the offset again.
type offsetCommitter struct {
	client sarama.Client
	group  string
	conf   *sarama.Config
	delay  time.Duration
	log    watermill.LoggerAdapter

	mu        sync.Mutex
	dirty     map[committerKey]markedOffset
	scheduled bool
	closed    bool
	flushMu   sync.Mutex // one commit in flight at a time, sent in the order they were taken
}

type committerKey struct {
	topic     string
	partition int32
}

type markedOffset struct {
	next       int64 // the offset the group resumes from: one past the last applied record
	generation int32
	member     string
}

// newOffsetCommitter connects a client of its own to brokers; it commits for group, delay after
// the first offset marked since its last commit.
func newOffsetCommitter(brokers []string, conf *sarama.Config, group string, delay time.Duration, log watermill.LoggerAdapter) (*offsetCommitter, error) {
	client, err := sarama.NewClient(brokers, conf)
	if err != nil {
		return nil, err
	}
	return &offsetCommitter{client: client, group: group, conf: conf, delay: delay, log: log, dirty: map[committerKey]markedOffset{}}, nil
}

// mark records that the member of sess has applied the partition's records before next.
func (c *offsetCommitter) mark(sess sarama.ConsumerGroupSession, topic string, partition int32, next int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.dirty[committerKey{topic, partition}] = markedOffset{next: next, generation: sess.GenerationID(), member: sess.MemberID()}
	if !c.scheduled {
		c.scheduled = true
		time.AfterFunc(c.delay, c.flush)
	}
}

// flush commits what was marked since the last flush.
func (c *offsetCommitter) flush() {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	c.mu.Lock()
	dirty, closed := c.dirty, c.closed
	c.dirty, c.scheduled = map[committerKey]markedOffset{}, false
	c.mu.Unlock()
	if closed || len(dirty) == 0 {
		return
	}
	// Offsets marked under an older session than the newest are left to Sarama's commit at
	// that session's end; the coordinator would refuse them anyway.
	var newest markedOffset
	for _, m := range dirty {
		if m.generation > newest.generation {
			newest = m
		}
	}
	req := sarama.NewOffsetCommitRequest(c.conf, c.group)
	req.ConsumerGroupGeneration, req.ConsumerID = newest.generation, newest.member
	for k, m := range dirty {
		if m.generation == newest.generation && m.member == newest.member {
			req.AddBlockWithLeaderEpoch(k.topic, k.partition, m.next, -1, sarama.ReceiveTime, "")
		}
	}
	if err := c.send(req); err != nil {
		c.log.Debug("early offset commit dropped", watermill.LogFields{"consumer_group": c.group, "error": err.Error()})
	}
}

// send sends req to the group's coordinator and reports the first error of the answer.
func (c *offsetCommitter) send(req *sarama.OffsetCommitRequest) error {
	broker, err := c.client.Coordinator(c.group)
	if err != nil {
		return err
	}
	resp, err := broker.CommitOffset(req)
	if err != nil {
		_ = c.client.RefreshCoordinator(c.group)
		return err
	}
	for _, ps := range resp.Errors {
		for _, kerr := range ps {
			switch {
			case kerr == sarama.ErrNoError:
			case errors.Is(kerr, sarama.ErrNotCoordinatorForConsumer), errors.Is(kerr, sarama.ErrConsumerCoordinatorNotAvailable):
				_ = c.client.RefreshCoordinator(c.group)
				return kerr
			default:
				return kerr
			}
		}
	}
	return nil
}

// close stops committing and closes the client; marks after it are ignored.
func (c *offsetCommitter) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.flushMu.Lock() // a flush in flight ends first
	defer c.flushMu.Unlock()
	_ = c.client.Close()
}

package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
)

// PublishBatchError is the error of a PublishBatch that delivered some of its records: Failed
// maps the index (in msgs) of each record that was not delivered to its error. A BatchPublisher
// that can tell returns one, so the consumer publishes again only what was not delivered; any
// other error means none was.
type PublishBatchError struct {
	Failed map[int]error
}

func (e *PublishBatchError) Error() string {
	for _, err := range e.Failed {
		return fmt.Sprintf("admin: %d records not delivered, e.g. %v", len(e.Failed), err)
	}
	return "admin: records not delivered"
}

// SaramaBatchError turns the error of sarama's SyncProducer.SendMessages(msgs) into a
// *PublishBatchError naming the records that failed; other errors are returned as they are.
func SaramaBatchError(msgs []*sarama.ProducerMessage, err error) error {
	var perrs sarama.ProducerErrors
	if !errors.As(err, &perrs) {
		return err
	}
	index := make(map[*sarama.ProducerMessage]int, len(msgs))
	for i, m := range msgs {
		index[m] = i
	}
	failed := make(map[int]error, len(perrs))
	for _, pe := range perrs {
		i, ok := index[pe.Msg]
		if !ok {
			return err // a record we did not send: trust none
		}
		failed[i] = pe.Err
	}
	return &PublishBatchError{Failed: failed}
}

// permanentPublish reports whether producing a record failed for a reason sending it again cannot
// fix: it is larger than the producer or the broker takes, or the broker refuses it as invalid.
func permanentPublish(err error) bool {
	var ce sarama.ConfigurationError
	return errors.As(err, &ce) || errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrInvalidMessage) ||
		errors.Is(err, sarama.ErrMessageSetSizeTooLarge) || errors.Is(err, sarama.ErrInvalidRecord)
}

// messageSize is about the bytes msg takes in a produce request, as a broker's size limit counts
// them.
func messageSize(m OutMessage) int {
	n := len(m.Key) + len(m.Value) + 64
	for k, v := range m.Headers {
		n += len(k) + len(v) + 8
	}
	return n
}

// publishAll produces msgs, in one flush with a BatchPublisher, else one by one in order. It
// returns the indexes of those not delivered with their errors; nil when all were.
func (c *Consumer) publishAll(ctx context.Context, msgs []OutMessage) map[int]error {
	all := func(from int, err error) map[int]error {
		failed := map[int]error{}
		for i := from; i < len(msgs); i++ {
			failed[i] = err
		}
		return failed
	}
	if bp, ok := c.deps.Publisher.(BatchPublisher); ok {
		err := bp.PublishBatch(ctx, msgs)
		if err == nil {
			return nil
		}
		var be *PublishBatchError
		if errors.As(err, &be) && len(be.Failed) > 0 {
			return be.Failed
		}
		return all(0, domain.Retryable("publish admin results", err))
	}
	var failed map[int]error
	for i, m := range msgs {
		if err := c.deps.Publisher.Publish(ctx, m.Topic, m.Key, m.Value, m.Headers); err != nil {
			if !permanentPublish(err) {
				for j, e := range all(i, domain.Retryable("publish admin result", err)) {
					if failed == nil {
						failed = map[int]error{}
					}
					failed[j] = e
				}
				return failed
			}
			if failed == nil {
				failed = map[int]error{}
			}
			failed[i] = err
		}
	}
	return failed
}

// outgoing is a result on its way to the result topic.
type outgoing struct {
	it       *item
	msg      OutMessage
	replaced bool // it is the small stand-in of a result that could not be published
}

// publishResults produces the results of a batch until each is delivered: only the undelivered
// are produced again, so none is published twice; one that cannot be produced for good (too
// large) is replaced once by a small failed result, and dropped if that fails too. It reports
// false when the session ended first (the batch is redelivered and answered from the ledger).
func (c *Consumer) publishResults(sess, work context.Context, pending []*outgoing) bool {
	for attempt := 0; len(pending) > 0; attempt++ {
		msgs := make([]OutMessage, len(pending))
		for i, o := range pending {
			msgs[i] = o.msg
		}
		failed := c.publishAll(work, msgs)
		var next []*outgoing
		var lastErr error
		for i, o := range pending {
			err, bad := failed[i]
			if !bad {
				continue
			}
			lastErr = err
			if permanentPublish(err) {
				if o.replaced {
					c.log.ErrorContext(work, "admin: a result cannot be published; dropped", "event_id", o.it.cmd.EventID.String(), "err", err)
					continue
				}
				o.msg, o.replaced = c.resultMessage(shortKey(o.it.key), c.tooLarge(o.it.cmd, *o.it.res, messageSize(o.msg))), true
			}
			next = append(next, o)
		}
		pending = next
		if len(pending) == 0 {
			return true
		}
		c.log.WarnContext(work, "admin: publish the results of a batch", "results", len(pending), "attempt", attempt+1, "err", lastErr)
		if sess.Err() != nil || !c.sleep(sess, c.backoff(attempt)) {
			return false
		}
	}
	return true
}

// tooLarge is the small failed result that stands in for res, which took size bytes as a record.
func (c *Consumer) tooLarge(cmd domain.AdminCommand, res domain.AdminResult, size int) domain.AdminResult {
	return c.result(cmd, domain.AdminFailed, ReasonResultTooLarge,
		map[string]any{"status": res.Status, "reason": res.Reason, "bytes": size, "max_bytes": c.cfg.MaxResultBytes}, nil)
}

// shortKey bounds the key of a stand-in result, so a record key too large to answer under does
// not keep the stand-in from being produced.
func shortKey(k string) string {
	if len(k) > MaxEnvelopeString {
		return k[:MaxEnvelopeString]
	}
	return k
}

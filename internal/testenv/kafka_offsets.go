package testenv

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitOffset commits offset for group on one partition of topic, as a consumer outside a group
// generation does (generation -1). The request names the topic by name and by ID, so it holds at
// every OffsetCommit version the broker speaks.
func CommitOffset(ctx context.Context, cl *kgo.Client, group, topic string, partition int32, offset int64) error {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(mresp.Topics) != 1 {
		return fmt.Errorf("metadata of %s: %d topics in the answer", topic, len(mresp.Topics))
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("commit %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		return fmt.Errorf("commit %s: %w", group, err)
	}
	return nil
}

-- +goose Up
-- Retention (docs/retention.md): the retention job turns the messages a tenant no longer keeps
-- into content-less markers by the time they were sent, and deletes the delete-for-me rows made
-- before its horizon; these indexes make both a range scan of the months that expired.
ALTER TABLE im_group_messages ADD INDEX idx_im_group_messages_created (created_at);
ALTER TABLE im_messages ADD INDEX idx_im_messages_created (created_at);
ALTER TABLE im_message_deletions ADD INDEX idx_im_message_deletions_deleted (deleted_at);

-- +goose Down
ALTER TABLE im_message_deletions DROP INDEX idx_im_message_deletions_deleted;
ALTER TABLE im_messages DROP INDEX idx_im_messages_created;
ALTER TABLE im_group_messages DROP INDEX idx_im_group_messages_created;

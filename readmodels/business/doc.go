// Package business is the read model of groups, memberships, relations and public user profiles:
// MySQL tables per tenant (im_groups, im_group_members, im_relations, im_users) written by Apply in
// one transaction with the consumer's processed-event rows, and Redis caches (seed 000 §5.2) that
// queries read first and refill from MySQL on a miss. Apply invalidates the caches only after its
// transaction commits; a Redis outage costs cache misses, never a wrong answer from MySQL.
package business

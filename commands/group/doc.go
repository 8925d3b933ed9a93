// Package group is the write side of groups, memberships, relations and user profiles: one
// handler per command that folds the aggregates it needs from the event store, asks the domain
// for a decision and appends the events with the streams' expected versions (several streams in
// one transaction). After a commit it tells the in-process caches (Invalidator) and the realtime
// layer (Notifier) what changed.
package group

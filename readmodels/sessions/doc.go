// Package sessions is the sessions read model: who was online when, per tenant. It folds the
// session events of the realtime gateway (session.opened.v1, session.closed.v1, published on
// im.session.event) into the tenant's im_sessions table, one row per session with its connect and
// disconnect times, and answers who was online at a moment. Redis presence says who is online
// now; this table is its history, rebuilt and verified from the event store like the other MySQL
// read models.
package sessions

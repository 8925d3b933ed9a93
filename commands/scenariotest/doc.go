// Package scenariotest writes a small but complete history of one tenant through the real command
// handlers, for the tests of what reads the event log back (export, republish): group messages
// and 1:1 messages, an edit, a recall, a delete-for-me and read marks, group changes with a mute
// and its lift, relations, a profile and a realtime session. It is test support; production code
// never imports it.
package scenariotest

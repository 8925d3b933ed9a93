// Package redisscript runs batches of Lua scripts against Redis in one pipeline round trip with
// EVALSHA, falling back to EVAL for exactly the calls the server answers NOSCRIPT. It is the one
// script runner of the sequencer (commands/seq), the hot read model (readmodels/hot) and the
// presence store (transport/presence), whose batches mix scripts with other commands.
package redisscript

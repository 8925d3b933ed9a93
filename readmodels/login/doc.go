// Package login keeps the login sessions a user lists in the tenant's MySQL database:
// im_login_sessions, one row per login session folded from its stream (user.session_started.v1,
// user.session_ended.v1), and im_login_cutoffs, the cutoff of each user's account stream (bans,
// revocations, password resets and changes), against which a session is listed as active or not.
// The login-sessions projection writes them from im.business.event; rebuilds and verifications
// fill them from the event store. What a transport lists comes from here; what a token is
// refused by is decided by the account guard, not by these tables.
package login

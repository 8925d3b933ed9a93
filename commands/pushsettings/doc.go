// Package pushsettings decides the changes of a user's push settings: the devices registered for
// offline reminders and the conversations muted for them. Each device and each mute is a small
// stream of its own whose last event is its current state (push.device_registered.v1,
// push.device_removed.v1, push.conversation_muted.v1, push.conversation_unmuted.v1 on
// im.business.event), so a change is decided from one event and reports truthfully whether it
// changed anything; a change that changes nothing appends nothing. The push-settings projection
// folds the events into the tenant's im_push_devices and im_push_mutes, which the push worker
// reads.
package pushsettings

// Package notify is the project's one LISTEN loop: a connection of its own that LISTENs on
// some channels and hands each notification on, that checks a silent connection with a ping,
// and that is made again with backoff whenever it fails. The claim engine's node (new work),
// singleflight (stored results) and failover (queued commands) each run one.
//
// A notification is a hint, never the only way work is found: after every (re)connection
// OnListen runs, since whatever was notified while nobody listened went unheard, and each user
// also polls at its own pace, so a lost connection delays work by the reconnection at most.
package notify

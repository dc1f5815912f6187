// Package heartbeatcmd is `batchclaim heartbeat`, on patterns/heartbeat: active/standby
// missed-heartbeat events. `heartbeat run` is one instance of the service: every instance
// accepts POST /heartbeat, and the election's primary of the role, the active instance,
// raises and clears missed-heartbeat events and delivers them to a webhook.
// `heartbeat event-types` shows and changes the event types while instances run.
// `heartbeat demo` runs three instances as processes of this binary on a scratch database with
// simulated sources that stop and resume, reconfigures event types and SIGKILLs the active
// instance, then compares every source's heartbeats with the stored events: no raise lost or
// repeated, no clear lost, nothing written by a standby, every event delivered.
package heartbeatcmd

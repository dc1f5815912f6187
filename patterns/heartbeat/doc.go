// Package heartbeat is an active/standby heartbeat monitor: monitored sources send
// heartbeats, and when a source misses K consecutive ones a control-loop event is raised,
// once; a fresh heartbeat clears it. Events are stored durably and delivered to a hook and an
// optional webhook. Several instances run; every one accepts heartbeats, and exactly one, the
// active instance, raises, clears and delivers.
//
// # The design it follows
//
// The ONAP DCAE heartbeat microservice design runs four processes per instance over three
// Postgres tables. vnf_table_1 holds, per eventName, the configured heartbeat interval and
// missed count, the number of sources, a validity flag and the control-loop policy fields.
// vnf_table_2 holds, per (eventName, sourceName), the last received heartbeat epoch time and
// a "control loop event raised" flag. hb_common is a single row: the configuration state
// (RECONFIGURATION or RUNNING) and the process id, hostname and "last accessed time" of the
// active instance. The HB worker process of every instance stores incoming heartbeats
// (discarding unknown eventNames); the DB monitoring process of the active instance raises
// the control-loop event when multiple consecutive heartbeats are missed and clears it on a
// recent heartbeat; the active instance's main process updates hb_common's last accessed
// time, and an inactive instance takes over when that time is "more than a minute or so"
// old; processes learn whether they are active by comparing their process id and hostname
// with hb_common. Reconfiguration sets the state to RECONFIGURATION (the other processes
// wait), marks every vnf_table_1 entry invalid, downloads the configuration, marks each
// entry it updates valid; the DB monitoring process deletes invalid entries and their
// vnf_table_2 rows.
//
// # What is built
//
//	design                               here
//	hb_common (active instance, time)    package election: role Config.Role, a lease judged by the database clock, a fencing epoch
//	vnf_table_1                          heartbeat_event_types (interval_ms, missed_count, control_loop, valid, generation)
//	vnf_table_2                          heartbeat_sources (received_at, last_epoch_microsec, heartbeats, episodes, raised)
//	the CL event sent                    heartbeat_events: one row per raise and per clear, which is also the delivery outbox
//	HB worker process                    Record and Handler (POST /heartbeat), on every instance
//	DB monitoring process                the active instance's step, every Config.StepInterval
//	CBS download / reconfiguration       Reconfigure, AddEventType, RemoveEventType
//
// A heartbeat updates its source's row: received_at = the database's now(), heartbeats + 1,
// lastEpochMicrosec as sent. The active instance's step is one transaction that first calls
// the election's Fence for its role, then (1) clears the open events of sources whose event
// type was removed and deletes those types with their sources, (2) clears every raised
// source whose heartbeat count grew since its raise, (3) raises every source of a valid type
// that is not raised and whose received_at + missed_count x interval <= now(), or that has a
// late silence (below), and (4) clears again, for the late ones. A raise increments the
// source's episode number and inserts a "raised" row; a clear inserts a "cleared" row for
// the same episode; (event_name, source_name, episode, kind) is unique. After the commit a
// delivery loop hands each stored, undelivered event to Config.OnEvent and POSTs it to
// Config.WebhookURL, oldest first and in order per source, and marks it delivered.
//
// A late silence is one that no step saw: the source fell silent for missed_count intervals
// and beat again while no active instance ran a step (during a failover). The heartbeat that
// ends it compares, in the same statement, its own now() with the stored received_at, and
// if the silence was long enough and not already raised it records the heartbeat before the
// silence; the next step raises that episode and clears it at once. So a silence is raised
// whether it ends before or after the next step.
//
// # Where this differs from the design, and why
//
// The active instance. The design's inactive instance compares hb_common's last accessed
// time, written with the active instance's clock, with its own clock, and the active
// instance learns it was replaced only on its next periodic check of hb_common: two clocks,
// and a window in which a replaced instance still raises and clears (duplicates, or a clear
// before the new instance's raise). Here the active instance is the primary of an election
// whose lease is judged by the database's clock alone, and every raise and clear is written
// in a transaction that calls the election's Fence: a replaced instance, even one paused
// past its lease and resumed, can write nothing (its transaction fails with
// batchclaim.ErrClaimLost).
//
// The clock that judges a miss. The design stores the "last received heartbeat epoch
// time", the lastEpochMicrosec the source put in its event, and compares it with the
// monitoring process's time. That is the source's clock against the monitor's: a source
// whose clock is a minute behind is raised at once and forever, one a minute ahead is
// never raised in time, and a source clock that jumps (NTP step, reboot) raises or hides a
// miss; lastEpochMicrosec also says when the source sent, not when the service received.
// Here received_at is the database's now() when the heartbeat was stored, and misses are
// judged by comparing it with the database's now(): one clock, and it measures what matters
// (no heartbeat reached the service). lastEpochMicrosec is still stored and passed on in
// every event, for the control loop to read.
//
// Exactly once per episode. The design's raised flag is read by the monitor and then set,
// and the event is published separately: a crash between the two loses the event or, after
// a takeover, sends it again. Here the flag, the episode number and the event row change in
// one transaction; the raise is a conditional UPDATE that re-checks the condition on the
// row's latest version (a heartbeat committed first wins), and the unique key makes a second
// raise of an episode impossible even by mistake. A new active instance reads the state its
// predecessor committed: it neither raises again what was raised nor misses what was not.
//
// Delivery from an outbox. The event row is the outbox entry: delivery happens after the
// commit, from the table, so a new active instance delivers what the old one stored but did
// not deliver. Delivery is at least once (an instance killed between a POST and its mark
// makes its successor POST again); the Idempotency-Key header (Event.Key) lets a receiver drop
// repeats. A failed delivery is retried with jittered exponential backoff (RetryBase ..
// RetryMax); a source's later events wait for its earlier ones, other sources' do not.
//
// "Fresh heartbeat". A clear needs a heartbeat stored after the raise. The source's
// heartbeat count says that exactly (raised_heartbeat < heartbeats); comparing timestamps
// would not, because a heartbeat's statement can take its now() before a raise commits and
// store it after.
//
// Reconfiguration. The design pauses every process while the state is RECONFIGURATION and
// leaves the configuration half written if the download fails. Here Reconfigure marks every
// entry invalid and writes and validates the new ones in one transaction, under a lock on
// the heartbeat_config row (so two reconfigurations never interleave): heartbeats and steps
// never see half a configuration and never wait. The validity flag keeps its role for
// removal: the active instance's next step clears every open event of a removed type, with
// reason "removed" (the design deletes the rows and leaves those events raised forever), and
// then deletes the type and its sources. Removing and re-adding a type keeps its sources'
// episode numbers increasing.
//
// Counters. vnf_table_1's "number of sourceName" is not stored; ListEventTypes counts
// sources. A stored count incremented by every worker is one hot row and, read-then-written,
// a lost update.
//
// # The lease
//
// No lease of its own: the active instance is the primary of its role in package election,
// whose lease is internal/lease's Deadline (window T - I) with its watchdog; when it passes,
// the term's context ends and the step stops, and every step's Fence refuses a deposed
// instance's writes in the database.
//
// # Timing
//
// With I an event type's interval, K its missed count and S the step interval, a source
// whose last heartbeat was stored at t is raised between t + K*I and t + K*I + S (plus the
// step's own duration), and a raised source is cleared within S of its first heartbeat after
// the raise. When the active instance dies, the election elects another within its timeout
// (Config.ElectionTimeout, plus one election interval); raises and clears that came due
// meanwhile, late silences included, are written by the new active instance's first step.
// Between two steps a source's row remembers one late silence; a second one that begins and
// ends before a step (two silences of K intervals within one failover) is not raised.
//
// # Limits
//
// heartbeat_events keeps every event; nothing prunes it. Delivered rows may be deleted, but
// keep each source's newest episode: a source whose type is removed and added again continues
// from the highest episode stored. A Fence error in a step aborts the whole step; the
// election then steps the instance down.
//
// # Use
//
// Configure event types with Reconfigure (or AddEventType / RemoveEventType), run a Service
// per instance (New, then Run), mount Service.Handler on an HTTP server, and let sources POST
// to any instance. The command `batchclaim heartbeat` runs an instance (`run`), sets or shows
// the configuration (`event-types`), and `batchclaim heartbeat demo` shows the whole with
// faults. docs/patterns.md puts this design and the design it follows side by side.
//
// The schema of batchclaim's tables (migrations.InSchema) is the pgdb.DB's, given to New:
// give the package functions (Reconfigure, AddEventType, RemoveEventType, ListEventTypes,
// Record, Handler, ListEvents, PendingDeliveries, AuditWriters) the same DB.
package heartbeat

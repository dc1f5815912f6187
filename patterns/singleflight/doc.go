// Package singleflight is a cache shared by many instances through one Postgres database in
// which each key is fetched from a slow source by at most one instance at a time, while the
// others wait for its result, and a fetcher that dies is replaced by one of the waiters.
//
// # The source design
//
// The HA cache cluster design this package comes from has peers that talk to each other over
// 0MQ, each with a local copy of the entries (key, data, expire, term). A client asks any
// peer; a peer with a fresh local copy answers at once. Otherwise the peer runs a per-key
// election: it becomes "candidate", sends QUESTION(key, term) to every peer, and peers vote
// yes if their own copy is not fresh and the term is not older than theirs. With a majority
// it becomes "sourcing", calls the source, ANNOUNCEs every second that it is doing so, and on
// success sends UPDATE(key, term, expiration, value) to everyone; the others follow it with a
// 2000 ms timeout and fall back to "idle" if it goes quiet. An UPDATE is kept only if its
// expiration is later than the local copy's. The expiry is fixed before retrieval. Clients
// get keep-alives while they wait and try another peer when told SEEOTHER or when nothing
// comes within 500 ms. Stale but quick answers are preferred to slow ones.
//
// # This package
//
// The database plays the part of the cluster's majority: one row per key in
// singleflight_entries holds both the entry (value, value_epoch, fetched_at, expires_at, and
// a negative result: error, error_epoch, error_until) and the fetch lease (fetch_epoch,
// holder, lease_expiry, and pending_expiry, the expiry the running fetch's value will get).
// Every decision is one statement on that one row, so its row lock orders them:
//
//   - Get reads the row. A fresh value (expires_at > now()) is returned at once.
//   - Otherwise, if no holder has a live lease, Get takes it (SingleflightAcquire): INSERT ...
//     ON CONFLICT DO UPDATE that succeeds only while the key has no fresh value, no fresh
//     negative result and no live lease, sets holder and lease_expiry = now() + LeaseTTL,
//     fixes pending_expiry = now() + TTL, and draws a new fetch_epoch from a sequence after
//     the row is locked: every fetch of a key has a larger epoch than all before it, never
//     reused. Whoever loses the race reads the row again and finds the winner's lease.
//   - The winner calls the Source in a goroutine of its own (so a caller that gives up does
//     not waste the fetch others wait for) and renews the lease every RenewInterval while
//     the call runs, up to MaxFetchTime. A renewal that matches no row (lease taken over)
//     cancels the call; so does a local monotonic deadline of 2/3 LeaseTTL after the last
//     successful renewal was sent, which always falls before the lease's expiry in the
//     database.
//   - The result is stored by one UPDATE that matches only while fetch_epoch is still this
//     fetch's epoch and holder is still this instance; it sets expires_at = pending_expiry,
//     frees the lease and NOTIFYs the key, delivered when it commits. A result whose lease
//     was taken over matches no row and is dropped (Stats.Rejected): a late result of an old
//     epoch never overwrites a newer one, and value_epoch only grows.
//   - Waiters remember the epoch of the fetch they wait for and block until a notification
//     for the key (a dedicated LISTEN connection held by Run, reopened with backoff when it
//     is lost), the lease's expiry as the database reported it, or PollInterval, whichever
//     is first, then read the row again. The value (or negative result) of that epoch or a
//     later one answers them; a lease found expired is taken over (Stats.Takeovers) and the
//     waiter becomes the fetcher.
//
// Keys are shared by every Cache on the database (1 to 1000 bytes; prefix them to keep
// several caches apart), and every Cache needs a Holder name of its own (the default is
// host-pid-random).
//
// Options: AllowStale returns a stale value at once, marked Entry.Stale, and starts one
// refresh if none is running. The caller's context bounds every wait, and Get returns its
// error when it ends.
//
// Source errors are stored as a negative result for ErrorTTL (default 5s) and returned as
// *SourceError to the fetcher's caller (wrapping the original error), to every waiter of that
// fetch in any instance (with its message), and to any Get in that window without calling
// the source again, so that a failing source is not called by every instance in turn. A
// stale value survives a failed refresh, and AllowStale callers keep getting it. A call that
// passes MaxFetchTime is cancelled and stored as such an error. Invalidate makes a value
// stale (also the value of a fetch already running) and forgets a negative result.
//
// # What differs from the source design, and why
//
//   - A lease in the database, not an election among peers. The majority vote exists so that
//     peers agree on one sourcing peer; a conditional write on one row does that in one
//     round trip, and a partitioned instance simply cannot reach the database instead of
//     needing partition detection, PING/PONG and SEEOTHER.
//   - One clock. The source design compares expirations written by other peers with each
//     peer's own now, and its follower timeouts are local guesses about a remote peer. Here
//     freshness, error windows and lease expiry are all compared in SQL with the database's
//     now(); an instance only measures relative durations on its monotonic clock (how long to
//     wait, its own renewal deadline).
//   - Fencing by epoch, not by expiration. The source keeps an UPDATE if its expiration is
//     later than the local copy's, so two overlapping sourcing peers (a paused one that
//     resumes) can still overwrite each other's entries, and nothing stops a peer whose term
//     has been superseded from publishing. Here a result is written only by the current
//     fetch epoch of its key, checked in the same statement that writes it.
//   - A lease that is renewed. The source design announces every second and lets followers
//     time out after two; here the fetcher renews its lease while the source runs rather
//     than taking one lease long enough for the slowest fetch, so that a dead fetcher is
//     replaced LeaseTTL after its last renewal (seconds) instead of after the longest fetch
//     could take, while a slow but live fetch keeps its key; MaxFetchTime still bounds a
//     source that hangs.
//   - Shared storage instead of lazy replication. The source design copies entries between
//     peers (ENTRYREQ/UPDATE) until each has all of them; the database row is the one copy,
//     which suits its "handful" of entries.
//   - A paused fetcher. A lease cannot stop a process that is frozen mid-call from resuming
//     its source call later; what it guarantees is that the call's result is dropped if the
//     lease was taken over meanwhile, and a live fetcher that cannot renew cancels its call
//     before anyone may take over. A Source whose side effects matter can fence them with
//     Request.Epoch.
//   - Source errors are kept briefly (ErrorTTL) and handed to the waiters; the source design
//     drops to idle on failure and leaves the waiting clients to time out and retry.
//
// # The lease
//
// The fetch lease is kept by internal/lease's renewal loop: a renewal every RenewInterval,
// each bounded by RenewInterval and by the local deadline (2/3 LeaseTTL from the send of the
// last successful renewal), and a watchdog that cancels the source call at that deadline,
// even while a renewal hangs. A renewal that matches no row (the lease was taken over) also
// cancels it. Only the row and its statements are this package's.
//
// # Timing rules
//
// Defaults: TTL = 5m, ErrorTTL = 5s, LeaseTTL = 10s, RenewInterval = LeaseTTL/4,
// MaxFetchTime = 1m, PollInterval = 2s. New checks RenewInterval <= LeaseTTL/3 (one failed
// renewal does not lose the lease) and ErrorTTL <= TTL. A fetcher that died is replaced
// within LeaseTTL + the waiter's wake-up (it sleeps until the expiry the database reported,
// plus 20ms); a source that ignores cancellation holds a key at most MaxFetchTime + LeaseTTL.
// Run returns once the fetches in progress have returned and their leases are released.
//
// docs/patterns.md puts this package beside the source design; `batchclaim singleflight
// demo` runs it in several processes and SIGKILLs a fetcher mid-fetch.
package singleflight

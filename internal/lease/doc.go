// Package lease is the one implementation of the local side of a lease in the database: a
// row with an owner, an epoch or token and an expiry of now() + TTL by the database clock,
// renewed apart from the work it protects. The row and its statements belong to each user;
// what is shared is how the holder decides, without asking the database, that it must stop:
//
//   - Deadline: the local deadline, sent + Window on the monotonic clock, where sent is when
//     the last renewal the database confirmed was sent. The database stamped that renewal no
//     earlier than sent, so its expiry is at least sent + TTL: with Window < TTL the holder
//     stops before anyone else can take the lease, however long the answer took to arrive
//     or the process was paused. A watchdog timer calls OnExpire when the deadline passes
//     without a confirmed renewal, so that the work is cancelled even while a renewal hangs.
//   - Keep: the renewal loop. It renews every Every, bounds each try by Step and by the
//     deadline (a renewal that arrives later is of no use), retries a failed try at the next
//     tick, and stops when its context ends, when the database refuses a renewal (the lease
//     was taken over or ended) or when the deadline passes.
//
// Packages claims (the instance's lease, with a renewal loop of its own that goes on past the
// deadline: a later renewal starts the next life) and election (its renewal shares a cycle
// and a connection with the campaign for roles) use Deadline; packages lock (KeepAlive) and
// singleflight (a fetch's lease) use Keep. patterns/doc.go says why each uses which, and
// docs/patterns.md ("One lease mechanism") lists every lease of the project with its local
// side.
package lease

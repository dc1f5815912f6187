// Package singleflightcmd is `batchclaim singleflight`, on patterns/singleflight: a per-key
// single-flight cache shared through Postgres. `singleflight demo` starts worker processes of
// this binary (the hidden `singleflight worker`) on a scratch database; their callers Get the
// same keys from a slow source that records every call. One fetcher is SIGKILLed mid-fetch
// and a waiter must take its lease over. The demo then checks from the database's record that
// no key was fetched twice at once, that every Get got an answer and that no stored value was
// replaced by one of an older fetch epoch.
package singleflightcmd

package batchclaim

import "context"

type claimKey struct{}

// WithClaim returns a context that carries c. The submitter passes each job's claim this way
// to the Submitter, so that a job's own writes can be fenced on it (see ClaimFrom).
func WithClaim(ctx context.Context, c Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimFrom returns the claim a job runs under, when ctx is (derived from) the context a
// Submitter was called with. A job that writes to the same Postgres makes the write
// conditional on it (claims.Engine.WriteFenced): a worker that lost its claim while the job
// ran, paused or cut off, then has its write refused at commit instead of overwriting the
// next owner's.
func ClaimFrom(ctx context.Context) (Claim, bool) {
	c, ok := ctx.Value(claimKey{}).(Claim)
	return c, ok
}

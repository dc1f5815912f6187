package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/batchclaim/batchclaim"
)

// MaxOutput bounds a job's recorded output, in bytes of JSON (batchclaim.MaxOutput, 32 KiB).
const MaxOutput = batchclaim.MaxOutput

// ErrOutputTooLarge: the output given to RecordOutput is larger than MaxOutput as JSON.
var ErrOutputTooLarge = errors.New("job output too large")

// RecordOutput records a small output of the running job: v as JSON, at most MaxOutput
// bytes. It is stored with the job when the attempt ends, whatever its outcome, and shown on
// the job's page of the status page (GET /api/batches/{seq} has it as "output") and by
// `batchclaim status --job SEQ`. A later call replaces an earlier one; an attempt that
// records none keeps the output an earlier attempt recorded. ctx must be the context Work was
// given (or derived from it); elsewhere RecordOutput returns an error, as it does for a value
// that does not encode or is too large (ErrOutputTooLarge), and then records nothing.
//
// A Submitter that is not a Workers records output with batchclaim.Result.Output.
func RecordOutput(ctx context.Context, v any) error {
	slot, ok := ctx.Value(outputKey{}).(*outputSlot)
	if !ok {
		return errors.New("jobs: RecordOutput needs the context of a job's Work")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jobs: record output: %w", err)
	}
	if len(b) > MaxOutput {
		return fmt.Errorf("jobs: record output: %w: %d bytes of JSON, at most %d", ErrOutputTooLarge, len(b), MaxOutput)
	}
	slot.mu.Lock()
	slot.b = b
	slot.mu.Unlock()
	return nil
}

type outputKey struct{}

// outputSlot holds what the running job recorded; goroutines of the job may record.
type outputSlot struct {
	mu sync.Mutex
	b  []byte
}

func withOutput(ctx context.Context) (context.Context, *outputSlot) {
	s := &outputSlot{}
	return context.WithValue(ctx, outputKey{}, s), s
}

func (s *outputSlot) get() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

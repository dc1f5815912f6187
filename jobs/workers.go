package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchclaim/batchclaim"
	"github.com/batchclaim/batchclaim/submitter"
)

// Workers holds one worker per kind and runs each job with the worker of its kind: it is the
// Submitter of a node (node.Config.Submitter) that runs typed jobs. Register the workers
// before the node starts; a Workers is not changed while it runs jobs.
//
// A job whose kind has no worker here, or whose arguments do not decode, is DISCARDED at its
// first attempt with a last error that names its kind and the kinds registered: it would
// fail the same way at every attempt. Once the worker is deployed, retry it (node.Retry,
// batchclaim retry). A job stored without a kind (node.Enqueue) goes to the Submitter given
// to AddPlain, or is DISCARDED the same way if there is none.
type Workers struct {
	kinds map[string]kind
	plain submitter.Submitter
}

// kind is the worker of one kind, with its arguments' type.
type kind interface {
	work(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error)
	timeout(b batchclaim.Batch) time.Duration
}

// NewWorkers returns an empty Workers.
func NewWorkers() *Workers { return &Workers{kinds: map[string]kind{}} }

// AddWorker registers worker for the kind of T. It panics if the kind is empty, too long or
// registered already (a programming error, found at start); AddWorkerSafely returns the error
// instead.
func AddWorker[T Args](w *Workers, worker Worker[T]) {
	if err := AddWorkerSafely(w, worker); err != nil {
		panic(err)
	}
}

// AddWorkerSafely is AddWorker returning the error instead of panicking.
func AddWorkerSafely[T Args](w *Workers, worker Worker[T]) error {
	var zero T
	name := zero.Kind()
	switch {
	case worker == nil:
		return fmt.Errorf("jobs: nil worker for kind %q", name)
	case name == "":
		return fmt.Errorf("jobs: the kind of %T is empty", zero)
	case len(name) > batchclaim.MaxKindLen:
		return fmt.Errorf("jobs: kind %q is %d bytes; at most %d", name, len(name), batchclaim.MaxKindLen)
	}
	if w.kinds == nil {
		w.kinds = map[string]kind{}
	}
	if _, ok := w.kinds[name]; ok {
		return fmt.Errorf("jobs: a worker for kind %q is registered already", name)
	}
	w.kinds[name] = typed[T]{worker}
	return nil
}

// AddPlain makes s run the jobs stored without a kind (node.Enqueue, ingest.Enqueue), so that
// typed jobs and plain ones share a node. It panics if one is set already.
func (w *Workers) AddPlain(s submitter.Submitter) {
	if w.plain != nil {
		panic("jobs: a Submitter for jobs without a kind is set already")
	}
	w.plain = s
}

// Kinds lists the kinds registered, sorted.
func (w *Workers) Kinds() []string {
	out := make([]string, 0, len(w.kinds))
	for k := range w.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Submit runs b with the worker of its kind (submitter.Submitter).
func (w *Workers) Submit(ctx context.Context, b batchclaim.Batch) (batchclaim.Result, error) {
	if b.Kind == "" && w.plain != nil {
		return w.plain.Submit(ctx, b)
	}
	k, ok := w.kinds[b.Kind]
	if !ok {
		return batchclaim.Result{Verdict: batchclaim.Discard, Detail: w.unknown(b.Kind)}, nil
	}
	return k.work(ctx, b)
}

// Timeout is the timeout of b's kind, if its worker has one (submitter.Timeouter).
func (w *Workers) Timeout(b batchclaim.Batch) time.Duration {
	if k, ok := w.kinds[b.Kind]; ok {
		return k.timeout(b)
	}
	return 0
}

func (w *Workers) unknown(name string) string {
	registered := "none"
	if len(w.kinds) > 0 {
		registered = strings.Join(w.Kinds(), ", ")
	}
	if name == "" {
		return fmt.Sprintf("job has no kind and no Submitter runs such jobs here (Workers.AddPlain); kinds registered: %s", registered)
	}
	return fmt.Sprintf("unknown job kind %q: no worker is registered for it on this instance; kinds registered: %s", name, registered)
}

// typed is the worker of the kind of T.
type typed[T Args] struct{ worker Worker[T] }

func (t typed[T]) decode(b batchclaim.Batch) (*Job[T], error) {
	j := &Job[T]{Batch: b}
	if err := json.Unmarshal(b.Payload, &j.Args); err != nil {
		return nil, fmt.Errorf("decode the arguments of kind %q: %w", b.Kind, err)
	}
	return j, nil
}

func (t typed[T]) work(ctx context.Context, b batchclaim.Batch) (res batchclaim.Result, err error) {
	j, err := t.decode(b)
	if err != nil {
		return batchclaim.Result{Verdict: batchclaim.Discard, Detail: err.Error()}, nil
	}
	ctx, out := withOutput(ctx)
	defer func() {
		if p := recover(); p != nil {
			res, err = batchclaim.Result{}, fmt.Errorf("job of kind %q panicked: %v", b.Kind, p)
		}
		res.Output = out.get()
	}()
	return resultOf(t.worker.Work(ctx, j))
}

func (t typed[T]) timeout(b batchclaim.Batch) time.Duration {
	to, ok := t.worker.(Timeouter[T])
	if !ok {
		return 0
	}
	j, err := t.decode(b)
	if err != nil {
		return 0 // Submit discards it
	}
	return to.Timeout(j)
}

var _ submitter.Timeouter = (*Workers)(nil)

// errNoKind is returned by Insert for arguments without a kind.
var errNoKind = errors.New("jobs: the arguments' Kind is empty")

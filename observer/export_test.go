package observer

import "github.com/batchclaim/batchclaim/pgdb"

// OnTx returns a Recorder like r whose statements run on tx, a transaction of the test's in
// db's schema, so that a test can hold a write open.
func (r *Recorder) OnTx(db pgdb.DB, tx pgdb.Querier) *Recorder {
	return &Recorder{db: db.In(tx), fence: r.fence, cfg: r.cfg, q: r.q}
}

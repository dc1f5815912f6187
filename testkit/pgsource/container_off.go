//go:build nodocker

package pgsource

import (
	"context"
	"errors"
)

// dockerFallback says whether this build can start a Postgres container: not this one,
// built with the nodocker tag (container.go has the fallback). Server says so instead of
// pinging a Docker engine.
const dockerFallback = false

func startContainer(context.Context) (*Source, error) {
	return nil, errors.New("built with -tags nodocker: no Docker fallback")
}

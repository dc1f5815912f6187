//go:build !nodocker

package pgsource

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// dockerFallback says whether this build can start a Postgres container (the last of
// Server's three ways). A build with the nodocker tag leaves it out, and with it
// testcontainers-go and the Docker client: the release image's daemon is built so (it
// starts faster and carries none of their code; docs/operations.md, "Deployment files").
const dockerFallback = true

const (
	// containerImage is the image of the Docker fallback.
	containerImage = "postgres:15-alpine"
	// containerTimeout bounds pulling and starting the container.
	containerTimeout = 3 * time.Minute
)

// startContainer runs a postgres container with testcontainers-go.
func startContainer(ctx context.Context) (*Source, error) {
	ctx, cancel := context.WithTimeout(ctx, containerTimeout)
	defer cancel()
	c, err := tcpostgres.Run(ctx, containerImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return nil, fmt.Errorf("run %s: %w", containerImage, err)
	}
	url, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	return &Source{
		URL:   url,
		Kind:  KindDocker,
		close: func(context.Context) error { return testcontainers.TerminateContainer(c) },
	}, nil
}

package dlt

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Defaults applied to zero Config fields.
const (
	// RequestTimeoutDefault bounds one HTTP request (a POST or one status GET); a status GET
	// that asks the ledger to wait gets the wait on top.
	RequestTimeoutDefault = 10 * time.Second
	// StatusConcurrencyDefault bounds the status GETs one Statuses call runs at once.
	StatusConcurrencyDefault = 4
	// SawtoothMaxStatusIDs is the most ids one Sawtooth GET /batch_statuses carries.
	SawtoothMaxStatusIDs = 15
	// ScabbardMaxStatusIDs is the most ids one scabbard GET batch_statuses carries; it keeps
	// the URL under about 7 KB.
	ScabbardMaxStatusIDs = 50
)

// Config selects and configures a Client; see NewClient.
type Config struct {
	// Flavor selects the API. Required.
	Flavor Flavor
	// URL is the Sawtooth REST API root (e.g. http://localhost:8008) or the Splinter node
	// (e.g. http://localhost:8085). Required; http or https, without query or fragment.
	URL string
	// Circuit and Service name the scabbard service: requests go to
	// {URL}/scabbard/{Circuit}/{Service}/... Required for scabbard, unused for sawtooth.
	Circuit, Service string
	// Authorization, when set, is sent as the Authorization header of every request.
	Authorization string
	// HTTPClient sends the requests. Nil means a client with no overall timeout (each request
	// is bounded by RequestTimeout through its context), the TLS settings below, and up to
	// IdleConnsDefault idle connections kept for reuse (net/http's default keeps 2 per host,
	// fewer than the submitter's workers use at once). A client's
	// own Timeout also bounds status requests that ask the ledger to wait (StatusesWait): keep
	// it above RequestTimeout plus the longest wait, or leave it zero.
	HTTPClient *http.Client
	// IdleConns is how many idle connections the default client keeps for reuse: at least as
	// many as POST at once (the submitter's workers) and ask for statuses beside them, so
	// that a burst's connections serve the next one instead of being closed and dialled
	// again. Zero means IdleConnsDefault. Not with an HTTPClient, which keeps its own.
	IdleConns int
	// CAFile names a PEM bundle of the certificate authorities trusted for an https URL, in
	// place of the system's roots. Empty means the system's roots.
	CAFile string
	// ClientCertFile and ClientKeyFile name a PEM certificate chain and key presented to the
	// ledger (mutual TLS). Both or neither. The TLS files need an https URL and no HTTPClient.
	ClientCertFile, ClientKeyFile string
	// RequestTimeout bounds one HTTP request; a status GET that asks the ledger to wait gets
	// the wait (whole seconds) on top. Zero means RequestTimeoutDefault.
	RequestTimeout time.Duration
	// StatusConcurrency bounds the status GETs one Statuses call runs at once. Zero means
	// StatusConcurrencyDefault.
	StatusConcurrency int
	// Logger receives debug logs of every request. Nil discards them.
	Logger *slog.Logger
}

// SawtoothConfig configures a Sawtooth client. The fields mean what they mean in Config.
type SawtoothConfig struct {
	URL               string
	Authorization     string
	HTTPClient        *http.Client
	IdleConns         int
	RequestTimeout    time.Duration
	StatusConcurrency int
	Logger            *slog.Logger
}

// ScabbardConfig configures a scabbard client. The fields mean what they mean in Config.
type ScabbardConfig struct {
	URL               string
	Circuit, Service  string
	Authorization     string
	HTTPClient        *http.Client
	IdleConns         int
	RequestTimeout    time.Duration
	StatusConcurrency int
	Logger            *slog.Logger
}

// NewClient returns the Client cfg.Flavor names. It does no network I/O; the TLS files cfg
// names, if any, are read here, so that a bad file fails at once.
func NewClient(cfg Config) (Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CAFile != "" || cfg.ClientCertFile != "" {
		hc, err := tlsHTTPClient(cfg.CAFile, cfg.ClientCertFile, cfg.ClientKeyFile, cmp.Or(cfg.IdleConns, IdleConnsDefault))
		if err != nil {
			return nil, fmt.Errorf("dlt config: %w", err)
		}
		cfg.HTTPClient, cfg.IdleConns = hc, 0 // the client keeps them
	}
	switch cfg.Flavor {
	case FlavorSawtooth:
		return NewSawtooth(SawtoothConfig{
			URL: cfg.URL, Authorization: cfg.Authorization, HTTPClient: cfg.HTTPClient, IdleConns: cfg.IdleConns,
			RequestTimeout: cfg.RequestTimeout, StatusConcurrency: cfg.StatusConcurrency, Logger: cfg.Logger,
		})
	default:
		return NewScabbard(ScabbardConfig{
			URL: cfg.URL, Circuit: cfg.Circuit, Service: cfg.Service, Authorization: cfg.Authorization,
			HTTPClient: cfg.HTTPClient, IdleConns: cfg.IdleConns, RequestTimeout: cfg.RequestTimeout,
			StatusConcurrency: cfg.StatusConcurrency, Logger: cfg.Logger,
		})
	}
}

func (c Config) validate() error {
	if _, err := ParseFlavor(string(c.Flavor)); err != nil {
		return fmt.Errorf("dlt config: %w", err)
	}
	u, err := parseBaseURL(c.URL)
	if err != nil {
		return fmt.Errorf("dlt config: %w", err)
	}
	if err := c.validateTLS(u.Scheme); err != nil {
		return fmt.Errorf("dlt config: %w", err)
	}
	if c.Flavor == FlavorScabbard {
		if err := checkScabbardNames(c.Circuit, c.Service); err != nil {
			return fmt.Errorf("dlt config: %w", err)
		}
	}
	return checkLimits(c.RequestTimeout, c.StatusConcurrency, c.IdleConns, c.HTTPClient)
}

func (c Config) validateTLS(scheme string) error {
	if (c.ClientCertFile == "") != (c.ClientKeyFile == "") {
		return errors.New("a client certificate and its key go together: set both or neither")
	}
	if c.CAFile == "" && c.ClientCertFile == "" {
		return nil
	}
	if scheme != "https" {
		return fmt.Errorf("a CA file or client certificate is set but the ledger URL is %s, not https", scheme)
	}
	if c.HTTPClient != nil {
		return errors.New("a CA file or client certificate is set together with an HTTPClient: configure TLS in the HTTPClient instead")
	}
	return nil
}

func checkScabbardNames(circuit, service string) error {
	switch {
	case circuit == "" && service == "":
		return errors.New("scabbard needs a circuit and a service")
	case circuit == "":
		return errors.New("scabbard needs a circuit")
	case service == "":
		return errors.New("scabbard needs a service")
	}
	return nil
}

func checkLimits(timeout time.Duration, concurrency, idleConns int, hc *http.Client) error {
	switch {
	case timeout < 0:
		return fmt.Errorf("dlt config: request timeout %v is negative", timeout)
	case concurrency < 0:
		return fmt.Errorf("dlt config: status concurrency %d is negative", concurrency)
	case idleConns < 0:
		return fmt.Errorf("dlt config: idle connections must not be negative, got %d", idleConns)
	case idleConns > 0 && hc != nil:
		return errors.New("dlt config: idle connections are set together with an HTTPClient: configure them in the HTTPClient instead")
	}
	return nil
}

// parseBaseURL checks a ledger URL: absolute http(s), with a host, without query or fragment.
func parseBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("ledger URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("ledger URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("ledger URL %q: scheme must be http or https", raw)
	case u.Host == "":
		return nil, fmt.Errorf("ledger URL %q has no host", raw)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("ledger URL %q must not have a query or fragment", raw)
	}
	return u, nil
}

// transportConfig is what both flavours share.
type transportConfig struct {
	url           string
	authorization string
	httpClient    *http.Client
	idleConns     int // of the default client
	timeout       time.Duration
	concurrency   int
	logger        *slog.Logger
	headers       map[string]string
}

// withDefaults returns c with the request timeout, the status concurrency, the HTTP client
// and the logger set where they are zero: the one place the clients' defaults are applied.
func (c transportConfig) withDefaults() transportConfig {
	c.timeout = cmp.Or(c.timeout, RequestTimeoutDefault)
	c.concurrency = cmp.Or(c.concurrency, StatusConcurrencyDefault)
	if c.httpClient == nil {
		c.httpClient = &http.Client{Transport: ledgerTransport(cmp.Or(c.idleConns, IdleConnsDefault))}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func newTransport(c transportConfig) (*transport, error) {
	if err := checkLimits(c.timeout, c.concurrency, c.idleConns, c.httpClient); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	base, err := parseBaseURL(c.url)
	if err != nil {
		return nil, fmt.Errorf("dlt config: %w", err)
	}
	return &transport{
		base:        base,
		hc:          c.httpClient,
		timeout:     c.timeout,
		concurrency: c.concurrency,
		auth:        c.authorization,
		headers:     c.headers,
		log:         c.logger,
	}, nil
}

package heartbeatcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/cli"
	"github.com/batchclaim/batchclaim/cmd/batchclaim/internal/database"
	"github.com/batchclaim/batchclaim/httpguard"
	"github.com/batchclaim/batchclaim/patterns/heartbeat"
	"github.com/batchclaim/batchclaim/pgdb"
)

// Command is `batchclaim heartbeat run|event-types|demo`.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return heartbeatRun(ctx, args[1:], stderr)
		case "event-types":
			return heartbeatEventTypes(ctx, args[1:], stdout, stderr)
		case "demo":
			return heartbeatDemo(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "Usage: batchclaim heartbeat run|event-types|demo [flags]\n\n"+
		"  run          one heartbeat-service instance: accepts POST /heartbeat; the active instance\n"+
		"               (the election's primary of the role) raises and clears missed-heartbeat\n"+
		"               events and delivers them to --webhook-url\n"+
		"  event-types  show | set FILE | add | remove NAME: the configuration (eventName, interval,\n"+
		"               missedCount), changed while instances run\n"+
		"  demo         three instances as processes, simulated sources that stop and resume, the\n"+
		"               active instance SIGKILLed; checks no raise lost or repeated, no clear lost,\n"+
		"               nothing written by a standby\n")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		return nil
	}
	return cli.ErrUsage
}

func heartbeatRun(ctx context.Context, args []string, stderr io.Writer) error {
	fs := cli.NewFlagSet("heartbeat run", "[flags]",
		"Runs one heartbeat-service instance until SIGTERM or SIGINT. Every instance accepts\n"+
			"POST /heartbeat (an ONAP VES heartbeat event: sourceName, eventName, lastEpochMicrosec)\n"+
			"and stores it; the instance elected primary of --role is the active one: every\n"+
			"--step-interval it raises a control-loop event for each source silent for missedCount\n"+
			"intervals of its eventName, clears it when the source beats again, and delivers each\n"+
			"event to --webhook-url (at least once, in order per source). GET /active answers 200 on\n"+
			"the active instance, 503 on a standby. Configure event types with\n"+
			"`batchclaim heartbeat event-types`.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	var cfg heartbeat.Config
	fs.StringVar(&cfg.Role, "role", heartbeat.RoleDefault, "election role whose primary is the active instance")
	fs.StringVar(&cfg.Name, "name", "", "this instance's name (default <host>-<pid>)")
	fs.DurationVar(&cfg.ElectionInterval, "election-interval", 0, "I: how often the election lease is renewed (default timeout/5, or 1s)")
	fs.DurationVar(&cfg.ElectionTimeout, "election-timeout", 0, "T: a silent active instance is replaced after this long; > 2I (default 5 x interval, or 5s)")
	fs.DurationVar(&cfg.StepInterval, "step-interval", heartbeat.StepIntervalDefault, "how often the active instance raises and clears")
	fs.DurationVar(&cfg.DeliveryInterval, "delivery-interval", heartbeat.DeliveryIntervalDefault, "how often the outbox is read when nothing new was stored")
	fs.StringVar(&cfg.WebhookURL, "webhook-url", "", "POST every event here as JSON (empty: events are only logged)")
	fs.DurationVar(&cfg.WebhookTimeout, "webhook-timeout", heartbeat.WebhookTimeoutDefault, "bound on one webhook POST")
	fs.DurationVar(&cfg.RetryBase, "retry-base", heartbeat.RetryBaseDefault, "first delay after a failed delivery (doubles, jittered)")
	fs.DurationVar(&cfg.RetryMax, "retry-max", heartbeat.RetryMaxDefault, "longest delay after a failed delivery")
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP address for POST /heartbeat, GET /active and /healthz")
	insecure := fs.Bool("insecure-listen", false, "allow a --listen address other hosts can reach (anyone reaching it can send heartbeats)")
	allowedHosts := cli.AllowedHostsFlag(fs)
	newLogger := cli.LogFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !*insecure && !httpguard.LoopbackOnly(*listen) {
		return fmt.Errorf("--listen %s is not a loopback address: anyone who reaches it could send heartbeats and hide an outage; "+
			"put an authenticating proxy in front and give --insecure-listen", *listen)
	}
	if err := cli.CheckHosts(*listen, cli.SplitList(*allowedHosts)); err != nil {
		return err
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	cfg.OnEvent = func(_ context.Context, e heartbeat.Event) error {
		logger.Info("control-loop event", "status", e.ClosedLoopEventStatus, "event_name", e.EventName,
			"source_name", e.SourceName, "episode", e.Episode, "reason", e.Reason, "event_id", e.ID)
		return nil
	}
	pool, err := database.OpenSchema(ctx, *dbURL, *schema, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	db, err := pgdb.Open(pool, *schema)
	if err != nil {
		return err
	}
	svc, err := heartbeat.New(db, cfg)
	if err != nil {
		return err
	}
	// GET /healthz and /active are for load balancers, which may name the listener anyhow.
	srv, bound, err := httpguard.Start(httpguard.Config{Addr: *listen, Handler: svc.Handler(), AllowedHosts: cli.SplitList(*allowedHosts),
		OpenPaths: []string{"/healthz", "/active"}, Logger: logger})
	if err != nil {
		return err
	}
	defer func() { _ = httpguard.Shutdown(ctx, srv, 2*time.Second) }()
	logger.Info("heartbeat service starting", "name", cfg.Name, "pid", os.Getpid(), "listen", bound,
		"role", cfg.Role, "step_interval", cfg.StepInterval, "webhook", cfg.WebhookURL != "", "schema", db.Schema())
	return database.Explain(*schema, svc.Run(ctx))
}

func heartbeatEventTypes(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := cli.NewFlagSet("heartbeat event-types", "show | set FILE|- | add --name N --interval D --missed-count K | remove NAME",
		"Shows or changes the event-type configuration while instances run. set replaces the whole\n"+
			"configuration with a JSON list, e.g.\n"+
			`  [{"eventName": "Heartbeat_vDNS", "interval": "60s", "missedCount": 3,`+"\n"+
			`    "controlLoop": {"policyName": "vDNS", "closedLoopControlName": "ControlLoop-vDNS"}}]`+"\n"+
			"(every entry is marked invalid, the listed ones written and marked valid, in one\n"+
			"transaction); the active instance then clears the open events of the removed types and\n"+
			"deletes them. add and remove change one entry.", stderr)
	dbURL := database.Flag(fs)
	schema := database.SchemaFlag(fs)
	asJSON := fs.Bool("json", false, "show: print JSON")
	var t heartbeat.EventType
	fs.StringVar(&t.Name, "name", "", "add: the eventName")
	fs.DurationVar(&t.Interval, "interval", 0, "add: the interval between heartbeats")
	fs.IntVar(&t.MissedCount, "missed-count", 0, "add: consecutive misses that raise an event")
	pos, err := cli.ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return cli.ErrUsage
	}
	raw, err := database.OpenSchema(ctx, *dbURL, *schema, 2)
	if err != nil {
		return err
	}
	defer raw.Close()
	defer func() { err = database.Explain(*schema, err) }()
	pool := pgdb.InSchema(raw, *schema)
	switch {
	case pos[0] == "show" && len(pos) == 1:
		types, err := heartbeat.ListEventTypes(ctx, pool)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(types)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT NAME\tINTERVAL\tMISSED\tVALID\tGENERATION\tSOURCES")
		for _, t := range types {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\t%d\t%d\n", t.Name, t.Interval, t.MissedCount, t.Valid, t.Generation, t.Sources)
		}
		return tw.Flush()
	case pos[0] == "set" && len(pos) == 2:
		var data []byte
		if pos[1] == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(pos[1])
		}
		if err != nil {
			return err
		}
		var types []heartbeat.EventType
		if err := json.Unmarshal(data, &types); err != nil {
			return fmt.Errorf("%s: want a JSON list of event types: %w", pos[1], err)
		}
		gen, err := heartbeat.Reconfigure(ctx, pool, types)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "configuration generation %d: %d event types\n", gen, len(types))
		return nil
	case pos[0] == "add" && len(pos) == 1:
		return heartbeat.AddEventType(ctx, pool, t)
	case pos[0] == "remove" && len(pos) == 2:
		return heartbeat.RemoveEventType(ctx, pool, pos[1])
	}
	fs.Usage()
	return cli.ErrUsage
}

package tasks

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults of [Options].
const (
	DefaultTTL             = time.Hour
	DefaultRetention       = time.Hour
	DefaultPollInterval    = time.Second
	DefaultLease           = 30 * time.Second
	DefaultMaxPerPrincipal = 100
	DefaultMaxTotal        = 10000
)

// Options configures a [Manager]. It is the `tasks:` section of the
// configuration file. Zero fields take the defaults.
type Options struct {
	// Store is where tasks live: "memory" (this replica only) or "redis"
	// (shared by every replica; needs the redis section: one server,
	// Sentinel or Cluster). Empty means redis when Redis is configured,
	// else memory.
	Store string `yaml:"store" schema:"enum=memory|redis"`
	// TTL bounds how long a task may run, from its creation; a task still
	// live then is failed (its work is stopped a tenth of the TTL, at most
	// 5s, early, so that the failure is recorded before the store may
	// forget the task). Zero means one hour.
	TTL time.Duration `yaml:"ttl"`
	// Retention is how long a finished task (its result or error) is kept
	// for tasks/get. Zero means one hour.
	Retention time.Duration `yaml:"retention"`
	// PollInterval is the pollIntervalMs suggested to clients. Zero means 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// Lease is how long a replica's claim on the tasks it runs lasts
	// without renewal; it renews every third of it. A live task whose
	// replica stopped renewing is marked failed within 1.5 leases. Zero
	// means 30s.
	Lease time.Duration `yaml:"lease"`
	// MaxPerPrincipal and MaxTotal cap the live tasks of one caller and of
	// the whole store. Zero means 100 and 10000; negative means no cap.
	MaxPerPrincipal int `yaml:"max_per_principal"`
	MaxTotal        int `yaml:"max_total"`
	// Tools marks tools (a server's own or an upstream's, by the name
	// clients call) whose calls run as tasks, overriding what the tool
	// declares.
	Tools []ToolOption `yaml:"tools"`
}

// ToolOption marks one tool's calls as tasks.
type ToolOption struct {
	Name    string  `yaml:"name"`
	Support Support `yaml:"support" schema:"enum=optional|required"`
}

// Validate reports every problem at once, each starting with its key
// relative to the section.
func (o *Options) Validate() error {
	var errs []error
	switch o.Store {
	case "", "memory", "redis":
	default:
		errs = append(errs, fmt.Errorf("store: must be memory or redis, got %q", o.Store))
	}
	for key, d := range map[string]time.Duration{"ttl": o.TTL, "retention": o.Retention, "poll_interval": o.PollInterval, "lease": o.Lease} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", key, d))
		}
	}
	if o.Lease > 0 && o.Lease < 3*time.Second {
		errs = append(errs, fmt.Errorf("lease: must be at least 3s (renewed every third), got %s", o.Lease))
	}
	seen := map[string]bool{}
	for i, t := range o.Tools {
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("tools[%d].name: required", i))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("tools[%d].name: %q is listed twice", i, t.Name))
		}
		seen[t.Name] = true
		if t.Support != SupportOptional && t.Support != SupportRequired {
			errs = append(errs, fmt.Errorf("tools[%d].support: must be optional or required, got %q", i, t.Support))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

func (o *Options) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&o.TTL, DefaultTTL)
	set(&o.Retention, DefaultRetention)
	set(&o.PollInterval, DefaultPollInterval)
	set(&o.Lease, DefaultLease)
	if o.MaxPerPrincipal == 0 {
		o.MaxPerPrincipal = DefaultMaxPerPrincipal
	}
	if o.MaxTotal == 0 {
		o.MaxTotal = DefaultMaxTotal
	}
}

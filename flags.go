package portcullis

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/config"
)

// commonFlags are the flags every command that loads configuration takes.
type commonFlags struct {
	fs         *flag.FlagSet
	configPath string
	listen     string
	metrics    string
	dev        bool
}

func newFlags(name string, stderr io.Writer, serving bool) *commonFlags {
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "configuration `file` (YAML)")
	if serving {
		f.fs.StringVar(&f.listen, "listen", "", "MCP listen `address` (overrides server.listen)")
		f.fs.StringVar(&f.metrics, "metrics-listen", "", "metrics listen `address` (overrides server.metrics_listen)")
		f.fs.BoolVar(&f.dev, "dev", false, "development mode: loopback only, a per-process request-state key")
	}
	return f
}

func (f *commonFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if f.fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %v", f.fs.Args())}
	}
	return nil
}

func (f *commonFlags) apply(c *configFile) {
	if f.listen != "" {
		c.Server.Listen = f.listen
	}
	if f.metrics != "" {
		c.Server.MetricsListen = f.metrics
	}
	// --dev serves only on loopback, where no balancer needs time to stop
	// routing: stopping a dev server does not wait for one.
	if f.dev && c.Server.DrainDelay == nil {
		var none time.Duration
		c.Server.DrainDelay = &none
	}
}

// loadConfig reads the file at path (none if empty), overlays PORTCULLIS_*
// variables from environ (skipping Kubernetes service links, see
// config.IgnoredEnv), applies defaults and validates. Every problem is
// returned at once.
func loadConfig(path string, environ []string, flags *commonFlags) (*configFile, error) {
	var c configFile
	// The loader sets every value it can parse even when others fail, so
	// validation still runs and the report lists both kinds of problem.
	loadErr := config.LoadFile(&c, path, environ, envPrefix)
	if flags != nil {
		flags.apply(&c)
	}
	c.defaults()
	validate := c.Validate
	if flags != nil && flags.dev {
		validate = c.validateDev
	}
	if err := errors.Join(loadErr, validate()); err != nil {
		return nil, err
	}
	return &c, nil
}

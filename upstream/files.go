package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
)

// readValueFile returns the contents of a mounted secret file, without one
// trailing newline. The error never holds the contents.
func readValueFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return string(b), nil
}

// validEnvName matches the name of an environment variable.
var validEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// readEnvFile parses a file of KEY=VALUE lines; blank lines and lines
// starting with # are skipped. Values are taken as written, without quote
// processing. The error names the line, never its value.
func readEnvFile(name string) ([]string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	var env []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || !validEnvName.MatchString(k) {
			return nil, fmt.Errorf("%s:%d: not a KEY=VALUE line", name, n)
		}
		env = append(env, k+"="+v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return env, nil
}

// NamedValue is an environment variable or header: its value is Value, or
// the contents of ValueFile with one trailing newline removed.
type NamedValue struct {
	Name      string `yaml:"name" schema:"required"`
	Value     string `yaml:"value"`
	ValueFile string `yaml:"value_file"`
}

// value resolves v, reading its file if it names one.
func (v NamedValue) value() (string, error) {
	if v.ValueFile != "" {
		return readValueFile(v.ValueFile)
	}
	return v.Value, nil
}

var validHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func checkNamedValue(at string, v NamedValue, name *regexp.Regexp) []error {
	var errs []error
	if !name.MatchString(v.Name) {
		errs = append(errs, fmt.Errorf("%s.name: %q is not a valid name", at, v.Name))
	}
	switch {
	case v.Value != "" && v.ValueFile != "":
		errs = append(errs, fmt.Errorf("%s: set value or value_file, not both", at))
	case v.ValueFile != "":
		if _, err := readValueFile(v.ValueFile); err != nil {
			errs = append(errs, fmt.Errorf("%s.value_file: %w", at, err))
		}
	}
	return errs
}

// checkURL checks the URL of an http upstream or a token endpoint.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL (required for transport http)")
	}
	if u.User != nil {
		return errors.New("must not contain credentials: use headers with value_file")
	}
	return nil
}

package config

import (
	"strings"
)

// ignored reports whether the variable name, which carries the prefix, is
// left alone: it names no key, and the kubelet could have injected it.
func (s *schema) ignored(name string) bool {
	if _, ok := s.env[name]; ok {
		return false
	}
	if _, ok := s.fileOnly[name]; ok {
		return false
	}
	return isServiceLink(s.prefix, name)
}

// isServiceLink reports whether name is one of the variables the kubelet
// injects for a Service whose variable form (its name upper-cased, '-'
// turned into '_') followed by '_' starts with prefix, in the forms
//
//	SVC_SERVICE_HOST
//	SVC_SERVICE_PORT
//	SVC_SERVICE_PORT_PORTNAME
//	SVC_PORT
//	SVC_PORT_N_PROTO
//	SVC_PORT_N_PROTO_PROTO, SVC_PORT_N_PROTO_PORT, SVC_PORT_N_PROTO_ADDR
//
// where PROTO is TCP, UDP or SCTP. With prefix "PORTCULLIS_", the Services
// "portcullis" and "portcullis-gw" qualify, "portcullisx" does not.
func isServiceLink(prefix, name string) bool {
	if prefix == "" || !strings.HasPrefix(name, prefix) {
		return false
	}
	// Service names contain underscores too, so try every split.
	for i := max(len(prefix)-1, 1); i < len(name); i++ {
		if name[i] == '_' && serviceVarName(name[:i]) && linkSuffix(name[i+1:]) {
			return true
		}
	}
	return false
}

// serviceVarName reports whether s is the variable form of a Service name,
// which is a DNS-1035 label: at most 63 lower-case letters, digits and '-',
// starting with a letter and not ending with '-'.
func serviceVarName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isUpper(s[0]) || s[len(s)-1] == '_' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isUpper(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// linkSuffix reports whether s is what follows "SVC_" in a service-link
// variable.
func linkSuffix(s string) bool {
	switch s {
	case "SERVICE_HOST", "SERVICE_PORT", "PORT":
		return true
	}
	if portName, ok := strings.CutPrefix(s, "SERVICE_PORT_"); ok {
		return servicePortVarName(portName)
	}
	rest, ok := strings.CutPrefix(s, "PORT_")
	if !ok {
		return false
	}
	number, rest, ok := strings.Cut(rest, "_")
	if !ok || !portNumber(number) {
		return false
	}
	proto, field, hasField := strings.Cut(rest, "_")
	switch proto {
	case "TCP", "UDP", "SCTP":
	default:
		return false
	}
	if !hasField {
		return true
	}
	switch field {
	case "PROTO", "PORT", "ADDR":
		return true
	}
	return false
}

// servicePortVarName reports whether s is the variable form of a Service
// port's name, which is an IANA service name: at most 15 lower-case letters,
// digits and '-', with at least one letter, no '-' at either end and no two
// in a row.
func servicePortVarName(s string) bool {
	if len(s) == 0 || len(s) > 15 || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return false
	}
	letter := false
	for i := range len(s) {
		c := s[i]
		switch {
		case isUpper(c):
			letter = true
		case isDigit(c), c == '_':
		default:
			return false
		}
	}
	return letter
}

// portNumber reports whether s is a port number, 1 to 65535, in decimal
// without leading zeros.
func portNumber(s string) bool {
	if len(s) == 0 || len(s) > 5 || s[0] == '0' {
		return false
	}
	n := 0
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= 65535
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

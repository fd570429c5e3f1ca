package bearer

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

const secret = "raw-token-abc123"

func TestFromTokenInfo(t *testing.T) {
	extra := map[string]any{}
	Set(extra, secret)
	ti := &sdkauth.TokenInfo{UserID: "u", Extra: extra}
	if got, ok := FromTokenInfo(ti); !ok || got != secret {
		t.Fatalf("FromTokenInfo = %q, %v", got, ok)
	}
	for _, ti := range []*sdkauth.TokenInfo{nil, {}, {Extra: map[string]any{extraKey: "plain string"}}} {
		if got, ok := FromTokenInfo(ti); ok || got != "" {
			t.Errorf("FromTokenInfo(%v) = %q, %v; want nothing", ti, got, ok)
		}
	}
}

// TestNeverPrinted checks that the usual ways of dumping a TokenInfo do
// not show the token.
func TestNeverPrinted(t *testing.T) {
	extra := map[string]any{}
	Set(extra, secret)
	ti := &sdkauth.TokenInfo{UserID: "u", Extra: extra}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		outs = append(outs, fmt.Sprintf(verb, ti), fmt.Sprintf(verb, *ti), fmt.Sprintf(verb, extra[extraKey]))
	}
	j, err := json.Marshal(ti)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "ti", ti, "extra", extra)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "ti", ti, "extra", extra)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if strings.Contains(o, secret) || strings.Contains(o, fmt.Sprintf("%x", secret)) {
			t.Errorf("token shown in %q", o)
		}
	}
}

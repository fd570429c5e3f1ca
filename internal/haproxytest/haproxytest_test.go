package haproxytest

import (
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    []string
		wantNot []string
	}{
		{
			name: "one request per connection",
			cfg:  Config{Front: "127.0.0.1:1", Backends: []string{"127.0.0.1:2", "127.0.0.1:3"}},
			want: []string{"bind 127.0.0.1:1\n", "balance roundrobin\n", "option httpchk GET /readyz\n",
				"option http-no-delay\n", "option http-server-close\n", "server r0 127.0.0.1:2 check\n", "server r1 127.0.0.1:3 check\n"},
			wantNot: []string{"http-response"},
		},
		{
			name: "session affinity",
			cfg:  Config{Front: "127.0.0.1:1", Backends: []string{"127.0.0.1:2"}, SessionAffinity: true},
			want: []string{"balance roundrobin\n", "stick match req.hdr(Mcp-Session-Id)\n", "stick store-response res.hdr(Mcp-Session-Id)\n"},
		},
		{
			name: "replica header",
			cfg:  Config{Front: "127.0.0.1:1", Backends: []string{"127.0.0.1:2"}, ReplicaHeader: "X-Replica"},
			want: []string{"http-response set-header X-Replica %[srv_name]\n", "server r0 127.0.0.1:2 check\n"},
		},
		{
			name:    "keep-alive",
			cfg:     Config{Front: "127.0.0.1:1", Backends: []string{"127.0.0.1:2"}, KeepAlive: true},
			want:    []string{"bind 127.0.0.1:1\n", "option http-no-delay\n", "server r0 127.0.0.1:2 check\n"},
			wantNot: []string{"http-server-close", "server r1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cfg.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("config lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("config has %q:\n%s", w, got)
				}
			}
			if tt.cfg.SessionAffinity {
				return
			}
			for _, w := range []string{"cookie", "stick", "balance source", "hash-type"} {
				if strings.Contains(got, w) {
					t.Errorf("config has %q: no affinity of any kind:\n%s", w, got)
				}
			}
		})
	}
}

package suggest

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"PingME", "calculator", "echo", "get_weather", "PORTCULLIS_SERVER_LISTEN"}
	tests := []struct {
		name, in, want string
	}{
		{name: "one typo", in: "gett_weather", want: "get_weather"},
		{name: "case only", in: "pingme", want: "PingME"},
		{name: "env var", in: "PORTCULLIS_SERVER_LISTN", want: "PORTCULLIS_SERVER_LISTEN"},
		{name: "too far", in: "launch_rockets", want: ""},
		{name: "no candidates", in: "x", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cands := known
			if tt.name == "no candidates" {
				cands = nil
			}
			if got := Closest(tt.in, cands); got != tt.want {
				t.Fatalf("Closest(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{name: "equal ignoring case", a: "Echo", b: "echo", want: 0},
		{name: "runes not bytes", a: "Côte", b: "Cote", want: 1},
		{name: "insert", a: "echo", b: "echoo", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Distance(tt.a, tt.b); got != tt.want {
				t.Fatalf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

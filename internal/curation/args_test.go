package curation

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// values returns the fixed arguments of name and JSON text pairs.
func values(pairs ...string) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = json.RawMessage(pairs[i+1])
	}
	return m
}

func TestCallArguments(t *testing.T) {
	fixed := &ToolSelection{
		FixedArguments: values("region", `"eu"`, "kind", `{"a":1}`),
		Arguments:      map[string]Argument{"unit": {Default: json.RawMessage(`"c"`)}, "city": {Description: "no default"}},
	}
	tests := []struct {
		name    string
		sel     *ToolSelection
		args    string
		want    string // decoded and compared; empty with wantErr
		wantErr error
	}{
		{name: "no arguments get the fixed ones and defaults", sel: fixed, args: ``,
			want: `{"kind":{"a":1},"region":"eu","unit":"c"}`},
		{name: "null is no arguments", sel: fixed, args: ` null `,
			want: `{"kind":{"a":1},"region":"eu","unit":"c"}`},
		{name: "an empty object", sel: fixed, args: ` { } `,
			want: `{"kind":{"a":1},"region":"eu","unit":"c"}`},
		{name: "the caller's arguments are kept", sel: fixed, args: `{"city":"Oslo","unit":"f"}`,
			want: `{"city":"Oslo","kind":{"a":1},"region":"eu","unit":"f"}`},
		{name: "an argument with a default named in another case is refused", sel: fixed, args: `{"UNIT":"f"}`, wantErr: ErrArgumentCase},
		{name: "with the default's exact name too", sel: fixed, args: `{"unit":"f","Unit":"k"}`, wantErr: ErrArgumentCase},
		{name: "escaped, in another case", sel: fixed, args: `{"\u0055nit":"f"}`, wantErr: ErrArgumentCase},
		{name: "an argument without a default may be named in any case", sel: fixed, args: `{"City":"Oslo"}`,
			want: `{"City":"Oslo","kind":{"a":1},"region":"eu","unit":"c"}`},
		{name: "_meta in the arguments is an argument like any other, and sets nothing", sel: fixed,
			args: `{"_meta":{"region":"us"}}`, want: `{"_meta":{"region":"us"},"kind":{"a":1},"region":"eu","unit":"c"}`},
		{name: "a nested key or a value like a fixed argument's name is no argument", sel: fixed, args: `{"city":{"region":"us"},"unit":"region"}`,
			want: `{"city":{"region":"us"},"kind":{"a":1},"region":"eu","unit":"region"}`},
		{name: "naming a fixed argument is refused", sel: fixed, args: `{"region":"us"}`, wantErr: ErrFixedArgument},
		{name: "with white space around it", sel: fixed, args: ` { "city" : [1, {"x":"}"}] , "Region"	:	"us" } `, wantErr: ErrFixedArgument},
		{name: "after an escaped quote", sel: fixed, args: `{"a\"b":"c\"","region":1}`, wantErr: ErrFixedArgument},
		{name: "in another case too", sel: fixed, args: `{"city":"x","Region":"us"}`, wantErr: ErrFixedArgument},
		{name: "in upper case", sel: fixed, args: `{"REGION":"us"}`, wantErr: ErrFixedArgument},
		{name: "escaped", sel: fixed, args: `{"\u0072egion":"us"}`, wantErr: ErrFixedArgument},
		{name: "with the Kelvin sign that folds to k", sel: fixed, args: `{"\u212aind":{}}`, wantErr: ErrFixedArgument},
		{name: "given twice", sel: fixed, args: `{"city":"x","city":"y","region":null}`, wantErr: ErrFixedArgument},
		{name: "arguments that are not an object", sel: fixed, args: `["region"]`, wantErr: ErrArgumentsNotObject},
		{name: "a string", sel: fixed, args: `"region"`, wantErr: ErrArgumentsNotObject},
		{name: "not JSON", sel: fixed, args: `{"region":}`, wantErr: ErrArgumentsNotObject},
		{name: "a tool without fixed arguments or defaults passes arguments on as they are", sel: &ToolSelection{ExposeAs: "x"},
			args: `["anything"]`, want: `["anything"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCall(tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Arguments(json.RawMessage(tt.args))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Arguments(%s) error = %v, want %v", tt.args, err, tt.wantErr)
			}
			if tt.wantErr != nil {
				return
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatalf("Arguments(%s) = %s, not JSON: %v", tt.args, got, err)
			}
			if err := json.Unmarshal([]byte(tt.want), &wantV); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotV, wantV) {
				t.Errorf("Arguments(%s) = %s, want %s", tt.args, got, tt.want)
			}
		})
	}
}

func TestNewCall(t *testing.T) {
	c, err := NewCall(&ToolSelection{ExposeAs: "x", Arguments: map[string]Argument{"a": {Description: "d"}}})
	if c != nil || err != nil {
		t.Errorf("NewCall without fixed arguments or defaults = %v, %v; want nil, nil", c, err)
	}
	if _, err := NewCall(&ToolSelection{FixedArguments: values("a", `{"a":`)}); err == nil {
		t.Error("NewCall with a value that is not JSON: no error")
	}
	if _, err := NewCall(&ToolSelection{Arguments: map[string]Argument{"a": {Default: json.RawMessage(`nope`)}}}); err == nil {
		t.Error("NewCall with a default that is not JSON: no error")
	}
}

// BenchmarkCallArguments measures what a curated call adds to each call
// of a tool with a fixed argument: the caller's arguments checked and
// the fixed one set.
func BenchmarkCallArguments(b *testing.B) {
	c, err := NewCall(&ToolSelection{FixedArguments: values("org", `"acme"`)})
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"q":"portcullis","limit":20,"sort":"stars"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Arguments(args); err != nil {
			b.Fatal(err)
		}
	}
}

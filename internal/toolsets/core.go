package toolsets

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	_ "time/tzdata" // the time tool must know every IANA zone, even in a scratch image

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// magicWord is what PingME returns.
const magicWord = "BISMILLAH"

// maxEchoLen bounds the echo tool's text, in characters.
const maxEchoLen = 4096

// coreTools is the default toolset: PingME, echo, calculator, time and
// whoami.
func coreTools(deps Deps) []catalog.Tool {
	return noSession(pingTool(), echoTool(), calculatorTool(), timeTool(deps.Now), whoamiTool(deps.Caller))
}

// noSession returns ts, each marked as using nothing of the session its
// request comes on (catalog.Tool.NoSession): their handlers answer from
// the request alone.
func noSession(ts ...catalog.Tool) []catalog.Tool {
	for i := range ts {
		ts[i].NoSession = true
	}
	return ts
}

// pingTool is PingME: no arguments, one text block holding magicWord.
func pingTool() catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "PingME",
		Title: "Ping (magic word)",
		Description: "Returns a magic word. Takes no arguments. Call this when the user asks for the magic word " +
			"or wants to check that this server answers; do not call it for anything else.",
		InputSchema: emptyObject(),
		Annotations: readOnly("Ping (magic word)", false),
	}, func(context.Context, *sdk.CallToolRequest, any) (*sdk.CallToolResult, any, error) {
		return textResult(magicWord), nil, nil
	})
}

type echoInput struct {
	Text string `json:"text" jsonschema:"The text to send back unchanged."`
}

func echoTool() catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "echo",
		Title: "Echo",
		Description: fmt.Sprintf("Returns the given text unchanged, as one text block. Use it to test that tool calls "+
			"reach this server and to see exactly what arguments arrive. Text is limited to %d characters.", maxEchoLen),
		InputSchema: schemaFor[echoInput](func(p map[string]*jsonschema.Schema) {
			p["text"].MaxLength = ptr(maxEchoLen)
		}),
		Annotations: readOnly("Echo", false),
	}, func(_ context.Context, _ *sdk.CallToolRequest, in echoInput) (*sdk.CallToolResult, any, error) {
		return textResult(in.Text), nil, nil
	})
}

type calculatorInput struct {
	Operation string  `json:"operation" jsonschema:"The operation to perform: add, subtract, multiply or divide."`
	A         float64 `json:"a" jsonschema:"The first operand (the dividend for divide)."`
	B         float64 `json:"b" jsonschema:"The second operand (the divisor for divide; must not be 0)."`
}

type calculatorOutput struct {
	Result float64 `json:"result" jsonschema:"The result of the operation."`
}

// calculatorTool is shared by the core and workshop toolsets.
func calculatorTool() catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "calculator",
		Title: "Calculator",
		Description: "Performs one basic arithmetic operation (add, subtract, multiply or divide) on two numbers " +
			"and returns {\"result\": number}. Call this when the user gives specific numbers to combine; " +
			"for a longer expression, call it once per step. Do not call it for questions about math in general.",
		InputSchema: schemaFor[calculatorInput](func(p map[string]*jsonschema.Schema) {
			p["operation"].Enum = []any{"add", "subtract", "multiply", "divide"}
		}),
		Annotations: readOnly("Calculator", false),
	}, calculate)
}

func calculate(_ context.Context, _ *sdk.CallToolRequest, in calculatorInput) (*sdk.CallToolResult, calculatorOutput, error) {
	var r float64
	switch in.Operation {
	case "add":
		r = in.A + in.B
	case "subtract":
		r = in.A - in.B
	case "multiply":
		r = in.A * in.B
	case "divide":
		if in.B == 0 {
			return nil, calculatorOutput{}, errors.New("cannot divide by zero: b must not be 0. " +
				"Ask the user for a non-zero divisor, or explain that the division is undefined")
		}
		r = in.A / in.B
	default: // the input schema's enum stops this first
		return nil, calculatorOutput{}, fmt.Errorf("unknown operation %q: use add, subtract, multiply or divide", in.Operation)
	}
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return nil, calculatorOutput{}, fmt.Errorf("the result of %s on %g and %g is too large for a 64-bit number; use smaller numbers", in.Operation, in.A, in.B)
	}
	return nil, calculatorOutput{Result: r}, nil
}

type timeInput struct {
	Timezone string `json:"timezone,omitempty" jsonschema:"Optional IANA time zone name such as Europe/Paris, America/New_York or UTC. Defaults to UTC."`
}

type timeOutput struct {
	Time      string `json:"time" jsonschema:"The current time in RFC 3339 (ISO 8601) format, with the zone's UTC offset."`
	Timezone  string `json:"timezone" jsonschema:"The IANA time zone the time is expressed in."`
	UTCOffset string `json:"utc_offset" jsonschema:"The zone's offset from UTC now, as +hh:mm or -hh:mm."`
	Weekday   string `json:"weekday" jsonschema:"The day of the week in that zone."`
	Unix      int64  `json:"unix" jsonschema:"Seconds since 1970-01-01T00:00:00Z."`
}

func timeTool(now func() time.Time) catalog.Tool {
	return catalog.NewTool(&sdk.Tool{
		Name:  "time",
		Title: "Current time",
		Description: "Returns the current server time in ISO 8601 (RFC 3339) format, in UTC or in the given IANA " +
			"time zone, with the UTC offset and weekday. Call this when the user asks what time or date it is, " +
			"needs a timestamp, or asks about the time in a city (pass its zone, e.g. Asia/Tokyo).",
		InputSchema: schemaFor[timeInput](func(p map[string]*jsonschema.Schema) {
			p["timezone"].MaxLength = ptr(64)
			p["timezone"].Examples = []any{"UTC", "Europe/Paris", "America/New_York"}
		}),
		Annotations: readOnly("Current time", false),
	}, func(_ context.Context, _ *sdk.CallToolRequest, in timeInput) (*sdk.CallToolResult, timeOutput, error) {
		name := strings.TrimSpace(in.Timezone)
		if name == "" {
			name = "UTC"
		}
		loc, err := loadZone(name)
		if err != nil {
			return nil, timeOutput{}, err
		}
		t := now().In(loc)
		return nil, timeOutput{
			Time:      t.Format(time.RFC3339),
			Timezone:  loc.String(),
			UTCOffset: t.Format("-07:00"),
			Weekday:   t.Weekday().String(),
			Unix:      t.Unix(),
		}, nil
	})
}

// loadZone loads an IANA zone. "Local" is refused: it is the server's own
// zone, which means nothing to the caller.
func loadZone(name string) (*time.Location, error) {
	unknown := fmt.Errorf("unknown time zone %q: use an IANA name such as \"UTC\", \"Europe/Paris\" or \"America/New_York\"", name)
	if name == "Local" {
		return nil, unknown
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, unknown
	}
	return loc, nil
}

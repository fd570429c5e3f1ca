package tools_test

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis"
	"github.com/portcullis-mcp/portcullis/tools"
)

type lookupIn struct {
	SKU string `json:"sku" jsonschema:"The stock-keeping unit to look up."`
}

type lookupOut struct {
	InStock int `json:"in_stock" jsonschema:"Units in stock."`
}

// A tool added to the catalog at start, next to the configured toolsets:
// the program is the portcullis binary with one more tool.
func ExampleAddTool() {
	portcullis.Main(portcullis.Catalog(func(c *tools.Catalog) error {
		tools.AddTool(c, &sdk.Tool{Name: "inventory_lookup", Description: "Returns the units in stock for a SKU."},
			func(_ context.Context, _ *sdk.CallToolRequest, in lookupIn) (*sdk.CallToolResult, lookupOut, error) {
				if in.SKU == "" {
					return nil, lookupOut{}, fmt.Errorf("sku is empty; ask the user which product they mean")
				}
				return nil, lookupOut{InStock: 3}, nil
			})
		return nil
	}))
}

package mcp

import (
	"context"
	"errors"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves server over newline-delimited JSON-RPC on in and out
// until the client closes in or ctx ends. out carries nothing but JSON-RPC
// frames: callers must send logs elsewhere (stderr). maxLine bounds one
// inbound frame in bytes (zero means the SDK's default).
func ServeStdio(ctx context.Context, server *sdk.Server, in io.Reader, out io.Writer, maxLine int) error {
	err := server.Run(ctx, &sdk.IOTransport{
		Reader:        io.NopCloser(in),
		Writer:        nopWriteCloser{out},
		MaxLineLength: maxLine,
	})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

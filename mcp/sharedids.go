package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// copyRequestIDPrefix starts the id of every server→client request a copy
// of a shared session sends.
const copyRequestIDPrefix = "pc."

// copyConn is the connection of a copy of a shared session, which gives
// the server→client requests it sends ids that no other copy of the
// session, on this replica or another, sends.
//
// The SDK numbers a connection's requests 1, 2, …; so copies of one
// session on two replicas send their client requests under the same ids.
// The client's answers reach every copy of the session (through the bus,
// whichever replica the client posted them to), and an answer would then
// complete the call waiting under its id on whichever copy read it first:
// a sampling request answered with the result of an elicitation. copyConn
// sends each request under "pc." TAG "." N, TAG drawn at random for the
// copy and N the SDK's number, gives the SDK back its number on an answer
// under the copy's own TAG, and drops an answer under another copy's.
// Answers under ids no copy sends (not strings starting with "pc.") are
// passed on as they came, for the SDK to match or ignore.
type copyConn struct {
	sdk.Connection
	tag string // copyRequestIDPrefix, TAG and "."
}

// newCopyConn wraps conn, the connection of a new copy.
func newCopyConn(conn sdk.Connection) *copyConn {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return &copyConn{Connection: conn, tag: copyRequestIDPrefix + hex.EncodeToString(b[:]) + "."}
}

// Write implements [sdk.Connection]: a request is sent under the copy's
// id for it.
func (c *copyConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if n, ok := req.ID.Raw().(int64); ok {
			id, err := jsonrpc.MakeID(c.tag + strconv.FormatInt(n, 10))
			if err != nil {
				return err
			}
			out := *req
			out.ID = id
			msg = &out
		}
	}
	return c.Connection.Write(ctx, msg)
}

// Read implements [sdk.Connection]: an answer under the copy's id gets
// the SDK's back, one under another copy's is dropped.
func (c *copyConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return msg, nil
		}
		s, ok := resp.ID.Raw().(string)
		if !ok || !strings.HasPrefix(s, copyRequestIDPrefix) {
			return msg, nil
		}
		n, err := strconv.ParseInt(strings.TrimPrefix(s, c.tag), 10, 64)
		if !strings.HasPrefix(s, c.tag) || err != nil {
			continue // another copy's
		}
		id, err := jsonrpc.MakeID(float64(n)) // the SDK's numbers: an int64 id, made from JSON's number
		if err != nil {
			continue
		}
		out := *resp
		out.ID = id
		return &out, nil
	}
}

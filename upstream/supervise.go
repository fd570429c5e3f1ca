package upstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
)

// run keeps the upstream connected until ctx is done, reconnecting with
// backoff after each failure.
func (u *upstream) run(ctx context.Context) {
	if u.deps.Hooks.Up != nil {
		u.deps.Hooks.Up(u.opts.Name, false)
	}
	attempt := 0
	for {
		start := time.Now()
		err := u.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= healthyRun {
			attempt = 0
		}
		d := u.deps.Backoff(attempt)
		attempt++
		u.logger.Warn("upstream: disconnected; reconnecting", "error", err, "retry_in", d.String(), "attempt", attempt)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if u.deps.Hooks.Restarted != nil {
			u.deps.Hooks.Restarted(u.opts.Name)
		}
	}
}

// connectAndServe connects, puts the upstream's lists in the catalog and
// serves until the session ends or ctx is done.
func (u *upstream) connectAndServe(ctx context.Context) error {
	t, stop, err := u.dialFn()
	defer stop()
	if err != nil {
		return err
	}
	kt := newKeptTransport(t)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	sess, err := u.client.Connect(cctx, kt, u.sessionOpts)
	cancel()
	if err != nil {
		kt.close()
		return fmt.Errorf("upstream: %s: connecting: %w", u.opts.Name, err)
	}
	u.links.add(sess, kt.notes, newHop(u.relay, u.logger, u.impl(), t, sess))
	defer u.links.remove(sess)
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	defer func() {
		u.setSession(nil, false)
		// The session's Close waits for the calls in flight, which an
		// upstream that stopped answering never ends: the connection is
		// closed first, so that they end now with a transport error.
		kt.close()
		_ = sess.Close()
		<-done
	}()
	// Drop a list_changed signal from the previous session: the lists are
	// read now anyway.
	select {
	case <-u.changes:
	default:
	}
	select {
	case <-u.broken:
	default:
	}
	u.setSession(sess, false)
	u.logger.Info("upstream: connected", "protocol_version", protocolVersion(sess))
	// The log level is set before the tools are in the catalog: a call
	// that arrives as soon as they are would otherwise run on a session
	// whose server drops its log messages.
	u.setLogLevel(ctx, sess)
	// A clash keeps the session, not ready, until a list_changed fixes it:
	// reconnecting would not change the names.
	if err := u.sync(ctx, sess); err == nil {
		u.setSession(sess, true)
	} else if !errors.Is(err, catalog.ErrClash) {
		return err
	}
	u.resubscribe(ctx, sess)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err // for the deferred wait
			if err == nil {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("upstream: %s: session ended: %w", u.opts.Name, err)
		case <-u.broken:
			return fmt.Errorf("upstream: %s: the connection broke during a call", u.opts.Name)
		case <-u.changes:
			if err := u.sync(ctx, sess); err != nil {
				if errors.Is(err, catalog.ErrClash) {
					u.setSession(sess, false)
					continue
				}
				return err
			}
			u.setSession(sess, true)
		}
	}
}

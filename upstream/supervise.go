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
func (s *supervisor) run(ctx context.Context) {
	if s.deps.Hooks.Up != nil {
		s.deps.Hooks.Up(s.opts.Name, false)
	}
	attempt := 0
	for {
		start := time.Now()
		err := s.connectAndServe(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= healthyRun {
			attempt = 0
		}
		d := s.deps.Backoff(attempt)
		attempt++
		s.logger.Warn("upstream: disconnected; reconnecting", "error", err, "retry_in", d.String(), "attempt", attempt)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if s.deps.Hooks.Restarted != nil {
			s.deps.Hooks.Restarted(s.opts.Name)
		}
	}
}

// connectAndServe connects, puts the upstream's lists in the catalog and
// serves until the session ends or ctx is done.
func (s *supervisor) connectAndServe(ctx context.Context) error {
	t, stop, err := s.conn.dialFn()
	defer stop()
	if err != nil {
		return err
	}
	sess, kt, err := s.conn.open(ctx, t)
	if err != nil {
		return fmt.Errorf("upstream: %s: connecting: %w", s.opts.Name, err)
	}
	defer s.conn.links.remove(sess)
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	defer func() {
		s.setSession(nil, false)
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
	case <-s.changes:
	default:
	}
	select {
	case <-s.broken:
	default:
	}
	s.setSession(sess, false)
	s.logger.Info("upstream: connected", "protocol_version", protocolVersion(sess))
	// The log level is set before the tools are in the catalog: a call
	// that arrives as soon as they are would otherwise run on a session
	// whose server drops its log messages.
	s.conn.setLogLevel(ctx, sess)
	// A clash keeps the session, not ready, until a list_changed fixes it:
	// reconnecting would not change the names.
	if err := s.sync(ctx, sess); err == nil {
		s.setSession(sess, true)
	} else if !errors.Is(err, catalog.ErrClash) {
		return err
	}
	s.resubscribe(ctx, sess)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-done:
			done <- err // for the deferred wait
			if err == nil {
				err = errors.New("connection closed")
			}
			return fmt.Errorf("upstream: %s: session ended: %w", s.opts.Name, err)
		case <-s.broken:
			return fmt.Errorf("upstream: %s: the connection broke during a call", s.opts.Name)
		case <-s.changes:
			if err := s.sync(ctx, sess); err != nil {
				if errors.Is(err, catalog.ErrClash) {
					s.setSession(sess, false)
					continue
				}
				return err
			}
			s.setSession(sess, true)
		}
	}
}

// healthyRun is how long a connection must last for the next failure to
// count as the first again.
const healthyRun = 30 * time.Second

package tasks

import "time"

// The reasons [Observer.Refused] is told.
const (
	RefusedOwnerCap   = "owner_cap"
	RefusedTotalCap   = "total_cap"
	RefusedStoreError = "store_error"
)

// StoreOps are the operations [Observer.StoreError] is told failed.
var StoreOps = []string{"create", "get", "update", "stale", "subscribe"}

// Observer hears what a [Manager] does, for metrics and logs. Its methods
// must be cheap and must not block. server is the name of the server the
// task was started on (see [WithServer]), empty for the root server.
type Observer interface {
	// Created: a task of tool was created on this replica.
	Created(server, tool string)
	// Refused: a task was not created; reason is RefusedOwnerCap,
	// RefusedTotalCap or RefusedStoreError.
	Refused(server, tool, reason string)
	// Live: the number of live tasks of the server this replica runs
	// with that status (working or input_required) changed by delta.
	Live(server string, status Status, delta int)
	// Finished: a task of tool that this replica ran ended with status
	// after d.
	Finished(server, tool string, status Status, d time.Duration)
	// Lost: a task of tool was marked failed because the replica running
	// it stopped renewing its lease.
	Lost(server, tool string)
	// StoreError: a store operation (one of StoreOps) failed.
	StoreError(op string)
}

// NopObserver hears nothing.
type NopObserver struct{}

func (NopObserver) Created(string, string)                         {}
func (NopObserver) Refused(string, string, string)                 {}
func (NopObserver) Live(string, Status, int)                       {}
func (NopObserver) Finished(string, string, Status, time.Duration) {}
func (NopObserver) Lost(string, string)                            {}
func (NopObserver) StoreError(string)                              {}

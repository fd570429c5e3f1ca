package portcullis

import (
	"slices"
	"testing"

	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// TestUpstreamErrorKinds ties the kinds observability declares for every
// upstream to the kinds the upstream package reports: a kind missing there
// would be a series that appears only on its first error.
func TestUpstreamErrorKinds(t *testing.T) {
	reported := []string{upstream.KindUnavailable, upstream.KindTransport, upstream.KindTimeout, upstream.KindCanceled, upstream.KindProtocol, upstream.KindToolError, upstream.KindConnect}
	if got := observability.UpstreamErrorKinds; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(reported))) {
		t.Errorf("observability.UpstreamErrorKinds = %v, want the upstream package's kinds %v", got, reported)
	}
}

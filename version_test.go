package portcullis

import "testing"

// TestBuildInfoNamesThePatches: the build info the metrics carry names
// the patches the linker stamped, the SDK's and fosite's, as the version
// does.
func TestBuildInfoNamesThePatches(t *testing.T) {
	sdk, fosite := sdkPatches, fositePatches
	t.Cleanup(func() { sdkPatches, fositePatches = sdk, fosite })
	sdkPatches, fositePatches = "sdk-a,sdk-b", "fosite-a"
	b := buildInfo()
	if b.SDKPatches != "sdk-a,sdk-b" || b.FositePatches != "fosite-a" {
		t.Errorf("buildInfo() = %+v, want the SDK's patches sdk-a,sdk-b and fosite's fosite-a", b)
	}
	if b.Version != version || b.Revision != revisionString() {
		t.Errorf("buildInfo() = %+v, want version %q and revision %q", b, version, revisionString())
	}
}

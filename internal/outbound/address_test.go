package outbound

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func TestForbiddenAddr(t *testing.T) {
	tests := []struct {
		addr      string
		forbidden bool
	}{
		{"8.8.8.8", false},
		{"1.1.1.1", false},
		{"172.32.0.1", false},
		{"100.63.255.255", false},
		{"100.128.0.0", false},
		{"2606:4700:4700::1111", false},
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", false},  // 6to4 of 8.8.8.8
		{"::ffff:8.8.8.8", false},   // IPv4-mapped public

		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true},
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"192.0.0.8", true},
		{"198.18.0.1", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		{"::1", true},
		{"::", true},
		{"fd00::1", true},
		{"fc00::1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fec0::1", true},
		{"ff02::1", true},
		{"ff01::1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:100.64.0.1", true},
		{"::127.0.0.1", true},        // IPv4-compatible
		{"64:ff9b::7f00:1", true},    // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", true}, // NAT64 of 169.254.169.254
		{"64:ff9b:1::1", true},       // local-use NAT64
		{"2002:7f00:1::1", true},     // 6to4 of 127.0.0.1
		{"2002:a00:1::1", true},      // 6to4 of 10.0.0.1
		{"2001::1", true},            // Teredo
		{"2001:db8::1", true},
		{"100::1", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			if got := ForbiddenAddr(a); got != tt.forbidden {
				t.Errorf("ForbiddenAddr(%s) = %v, want %v", tt.addr, got, tt.forbidden)
			}
		})
	}
	if !ForbiddenAddr(netip.Addr{}) {
		t.Error("the zero Addr is allowed")
	}
}

func TestCheckDial(t *testing.T) {
	tests := []struct {
		address   string
		forbidden bool
	}{
		{"93.184.216.34:443", false},
		{"[2606:4700:4700::1111]:443", false},
		{"127.0.0.1:443", true},
		{"[::1]:443", true},
		{"[::ffff:127.0.0.1]:443", true},
		{"[fe80::1%eth0]:443", true},
		{"not an address", true},
		{"example.com:443", true},
	}
	for _, tt := range tests {
		t.Run(tt.address, func(t *testing.T) {
			err := CheckDial(context.Background(), "tcp", tt.address, nil)
			if got := errors.Is(err, ErrForbiddenAddress); got != tt.forbidden {
				t.Errorf("CheckDial(%s) = %v, want forbidden %v", tt.address, err, tt.forbidden)
			}
		})
	}
}

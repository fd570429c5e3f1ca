package upstream

import (
	"context"
	"strings"
	"testing"
)

func TestListAllStopsMisbehavingPagination(t *testing.T) {
	tests := []struct {
		name    string
		page    func(cursor string) ([]int, string)
		want    int
		wantErr string
	}{
		{name: "three pages", page: func(c string) ([]int, string) {
			next := map[string]string{"": "a", "a": "b", "b": ""}[c]
			return []int{1}, next
		}, want: 3},
		{name: "empty pages that loop", page: func(c string) ([]int, string) {
			return nil, map[string]string{"": "x", "x": "y", "y": "x"}[c]
		}, wantErr: "repeats an earlier cursor"},
		{name: "endless fresh cursors", page: func(c string) ([]int, string) {
			return nil, c + "."
		}, wantErr: "more than 1000 pages"},
		{name: "too many items", page: func(c string) ([]int, string) {
			return make([]int, 600), c + "."
		}, wantErr: "more than 10000 items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := listAll(context.Background(), func(_ context.Context, c string) ([]int, string, error) {
				items, next := tt.page(c)
				return items, next, nil
			}, func(int) { n++ })
			if tt.wantErr == "" {
				if err != nil || n != tt.want {
					t.Errorf("listAll = %v with %d items, want nil with %d", err, n, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("listAll = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

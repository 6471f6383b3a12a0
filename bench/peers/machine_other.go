//go:build !linux

package peers

func fsType(string) string { return "" }

//go:build !linux

package network

import "errors"

func createRealNetNS(string) error { return errors.New("real network namespaces need Linux") }

func removeRealNetNS(string) error { return nil }

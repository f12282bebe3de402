//go:build tools

// Package gatewayapi only records, for go mod tidy, that this module requires sigs.k8s.io/gateway-api:
// the Makefile reads the module's config/crd from the module cache. Never built (the tools tag).
package gatewayapi

import _ "sigs.k8s.io/gateway-api/apis/v1"

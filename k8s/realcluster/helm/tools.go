//go:build tools

// Package helmbuild pins the helm command.
package helmbuild

import _ "helm.sh/helm/v4/cmd/helm"

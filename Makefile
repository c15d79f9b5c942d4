# Vigil build, test and benchmark entry points. `make help` lists them.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w -X github.com/vigil-hpc/vigil/internal/buildinfo.Version=$(VERSION) \
             -X github.com/vigil-hpc/vigil/internal/buildinfo.Revision=$(REVISION)
FUZZTIME  ?= 10s
BENCHTIME ?= 1s
STATICCHECK ?= v0.8.2
# nfpm builds the .deb and .rpm packages (v2.45.0: later ones need modules
# the proxy does not serve).
NFPM      ?= v2.45.0
# Package version: the latest v* tag, else 0.0.0, plus the commit.
PKG_VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' --abbrev=0 2>/dev/null); echo $${v:-v0.0.0} | sed 's/^v//')+git$(REVISION)
PKG_ARCH  ?= $(shell $(GO) env GOARCH)

WEB_SRC   := $(shell find web/src web/package.json web/package-lock.json web/tsconfig.json web/build.mjs -type f 2>/dev/null)

.PHONY: all build web package test test-short test-e2e bench fuzz fmt fmt-check vet lint update-golden demo clean help

all: fmt-check vet test build ## format check, vet, test, build

build: web ## build bin/vigil, the lean node daemon bin/vigil-sampler and bin/libvigilio.so
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/vigil ./cmd/vigil
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/vigil-sampler ./cmd/vigil-sampler
	$(MAKE) -C libvigilio OUT=$(CURDIR)/bin/libvigilio.so
	$(MAKE) -C ibmad OUT=$(CURDIR)/bin/vigil-ibmad

web: internal/web/dist/index.html ## build the dashboard (TypeScript) into internal/web/dist

internal/web/dist/index.html: $(WEB_SRC)
	@if [ -f web/package.json ]; then cd web && npm ci --no-audit --no-fund && npm run build; \
	else echo "no web/ sources yet"; fi

package: build ## .deb and .rpm packages of vigil-sampler and vigil into build/packages
	rm -rf build/packages build/package-root && mkdir -p build/packages build/package-root
	./bin/vigil-sampler --sample-config > build/package-root/vigil.toml
	@set -e; for pkg in vigil-sampler vigil; do for fmt in deb rpm; do \
	  VERSION='$(PKG_VERSION)' ARCH='$(PKG_ARCH)' $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM) \
	    package --config packaging/$$pkg.yaml --packager $$fmt --target build/packages/; \
	done; done

test: build lint package ## lint, then unit, fixture, end-to-end and package tests
	cd web && npm test
	$(GO) test -count=1 ./...

test-short: ## unit and fixture tests only
	$(GO) test -short -count=1 ./...

test-race: ## all tests under the race detector
	$(GO) test -race -short -count=1 ./...

test-e2e: build ## end-to-end tests of the real binary
	$(GO) test -count=1 -run 'E2E' ./cmd/...

bench: build ## Go benchmarks (figures go to docs/benchmarks.md)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

fmt: ## gofmt the tree
	gofmt -w cmd internal

fmt-check: ## fail if gofmt would change anything
	@out=$$(gofmt -l cmd internal); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet ./...

lint: fmt-check vet ## gofmt, vet, staticcheck, and no os/exec in sampler plugins
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) ./...
	@# Plugins run on every node every tick: they read files, never spawn programs.
	@bad=$$($(GO) list -f '{{.ImportPath}}: {{join .Imports " "}}' ./internal/sampler/plugins/... | grep -w 'os/exec' || true); \
	if [ -n "$$bad" ]; then echo "sampler plugins must not import os/exec:"; echo "$$bad"; exit 1; fi

update-golden: ## rewrite every golden file from current output
	$(GO) test -count=1 $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... \
	  | grep 'internal/testutil' | cut -d' ' -f1 | grep -v 'internal/testutil$$') -args -update

demo: build ## run Vigil locally with live output
	./bin/vigil demo

clean: ## remove build outputs
	rm -rf bin build web/node_modules
	find internal/web/dist -mindepth 1 ! -name .keep -delete 2>/dev/null || true

help: ## list targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

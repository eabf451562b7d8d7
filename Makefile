# nodetide — see README.md.
SHELL := /usr/bin/env bash
GO ?= go
FUNCTIONS := evaluate drain schedule
LAMBDA_ENV := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_FLAGS := -trimpath -tags lambda.norpc -ldflags "-s -w"
TEST_TIMEOUT ?= 40m

.PHONY: build functions cli testbed node-deps test test-unit bench demo vet fmt clean FORCE

## build: the three Lambda bootstraps (linux/arm64) and bin/nodetide for this machine
build: functions cli

functions: $(FUNCTIONS:%=build/%/bootstrap)

build/%/bootstrap: FORCE
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $@ ./functions/$*

cli: bin/nodetide

bin/nodetide: FORCE
	$(GO) build -o $@ ./cmd/nodetide

## testbed: build (once, cached outside the repo) the local control-plane binaries
testbed:
	@hack/testbed-build.sh >/dev/null

## node-deps: the pinned npm packages (dynalite, ...)
node-deps: node_modules/.package-lock.json

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

## test: every test, integration tests on the local control plane and dynalite included
test: testbed node-deps vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd infra && $(GO) vet ./... && $(GO) test -count=1 ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

## bench: planner benchmarks (speed and memory goals)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./pkg/planner/

## demo: the evaluate cycle on a local control plane, step by step
demo: testbed node-deps
	$(GO) run ./hack/demo

clean:
	rm -rf build bin

FORCE:

# nodetide — see README.md.
SHELL := /usr/bin/env bash
GO ?= go
FUNCTIONS := evaluate drain schedule
LAMBDA_ENV := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_FLAGS := -trimpath -tags lambda.norpc -ldflags "-s -w"
TEST_TIMEOUT ?= 40m

.PHONY: build functions cli testbed node-deps test test-unit fuzz bench demo measure vet clean synth bootstrap deploy invoke up down release release-check FORCE

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

## node-deps: the pinned npm packages (dynalite, aws-local-stepfunctions, aws-cdk, ...)
node-deps: node_modules/.package-lock.json node_modules/go.mod

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

# aws-cdk ships Go project templates; a go.mod of their own keeps them out
# of this module's ./... patterns.
node_modules/go.mod: node_modules/.package-lock.json
	printf 'module nodetide.invalid/node_modules\n' > $@

## test: every test, integration tests on the local control plane and dynalite included, then a
##   brief fuzz of every parser (make fuzz)
test: testbed node-deps vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd infra && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(MAKE) --no-print-directory fuzz

## test-unit: the unit lane: every test that needs no local control plane, Step Functions service or
##   function under the Lambda RIE (those skip under -short, saying why), infra's CDK assertions and
##   cdk-nag included; a couple of minutes. make test runs both lanes
test-unit: node-deps vet
	$(GO) test -short -count=1 -timeout $(TEST_TIMEOUT) ./...
	cd infra && $(GO) vet ./... && $(GO) test -short -count=1 ./...

## fuzz: fuzz schedule documents, cron expressions, nodetide.yaml, the Kamatera INI, snapshot documents
##   and the three functions' events for FUZZTIME executions each (a failing input is saved under the package's
##   testdata/fuzz and then replayed by every go test)
# A count, not a duration: Go 1.26's fuzz coordinator can report a bare "context deadline exceeded"
# when a duration runs out while a worker is busy (go.dev/issue/75804, fixed in Go 1.27); a count
# has no deadline to race. 20000 executions take 5 to 30 s per target here.
FUZZTIME ?= 20000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/schedule/
	$(GO) test -run '^$$' -fuzz '^FuzzCron$$' -fuzztime $(FUZZTIME) ./pkg/schedule/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./pkg/config/
	$(GO) test -run '^$$' -fuzz '^FuzzParseCloudConfig$$' -fuzztime $(FUZZTIME) ./pkg/providers/kamatera/
	$(GO) test -run '^$$' -fuzz '^FuzzReadSnapshot$$' -fuzztime $(FUZZTIME) ./pkg/snapshot/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./pkg/schedulefire/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./pkg/evaluate/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./pkg/drain/

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod / go.sum are not tidy: run go mod tidy"; exit 1; }

## bench: planner, config and read-path benchmarks (speed and memory goals), then on one core
##   consolidation of a 5,000-node, 150,000-pod cluster and the snapshot file: that snapshot read in each
##   form and planned by the CLI (writes about 2 GB to TMPDIR)
bench:
	$(GO) test -run '^$$' -skip '^(BenchmarkSnapshotFile|BenchmarkConsolidation|BenchmarkConsolidationReplace|BenchmarkConsolidationReplaceFound)$$' -bench . -benchmem -benchtime 3x ./pkg/planner/ ./pkg/snapshot/ ./pkg/config/ ./pkg/k8s/
	GOMAXPROCS=1 $(GO) test -run '^$$' -bench '^BenchmarkConsolidation(Replace|ReplaceFound)?$$' -benchmem -benchtime 3x -cpu 1 ./pkg/planner/
	GOMAXPROCS=1 $(GO) test -run '^$$' -bench '^BenchmarkSnapshotFile$$' -benchmem -benchtime 1x -cpu 1 -timeout 30m ./pkg/snapshot/

## demo: the evaluate cycle on a local control plane, step by step
demo: testbed node-deps
	$(GO) run ./hack/demo

## measure: size the three functions from measured runs on the local test bed (a realistic cluster; the
##   functions under the Lambda RIE), time 50 scale-ups through the webhook trigger, and write
##   infra/measurements.md; about ten minutes. MEASURE_ARGS adds options, e.g.
##   MEASURE_ARGS="-nodes 400 -pods 8000" (go run ./hack/measure -h lists them). Then evaluate at
##   1,000 nodes and 30,000 pods built on the test bed (MEASURE_BED_SCALE; a few more minutes), and its
##   cycle at 5,000 and 10,000 nodes (150,000 and 300,000 pods) against an API server double
##   (MEASURE_SCALE, with the function memory of each in MEASURE_SCALE_MEMORY), which the bed cannot hold
MEASURE_ARGS ?=
MEASURE_BED_SCALE ?= 1000
MEASURE_SCALE ?= 5000,10000
MEASURE_SCALE_MEMORY ?= 512,1024
measure: testbed node-deps
	$(GO) run ./hack/measure $(MEASURE_ARGS)
	$(GO) run ./hack/measure -bed-scale $(MEASURE_BED_SCALE)
	$(GO) run ./hack/measure -scale $(MEASURE_SCALE) -scale-memory $(MEASURE_SCALE_MEMORY)

## synth: the CloudFormation template (infra/cdk.out) from CONFIG (default: NODETIDE_CONFIG_FILE, else
##   nodetide.example.yaml); needs no AWS credentials. CDK_ARGS adds cdk options, e.g. -c subnetIds=a,b
CONFIG ?= $(NODETIDE_CONFIG_FILE)
CDK_ARGS ?=
CDK := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true ../node_modules/.bin/cdk
CDK_CONFIG = $(if $(CONFIG),-c config=$(abspath $(CONFIG)))

synth: functions node-deps
	cd infra && $(CDK) synth --quiet $(CDK_CONFIG) $(CDK_ARGS)
	@echo "synth: infra/cdk.out/$$(cd infra/cdk.out && ls *.template.json)"

## bootstrap: prepare the AWS account and region of the current credentials for CDK deployments, once
##   (cdk bootstrap: the bucket and roles that hold the functions' code)
bootstrap: functions node-deps
	cd infra && $(CDK) bootstrap $(CDK_CONFIG) $(CDK_ARGS)

## deploy: synth and deploy the stack for CONFIG with the current AWS credentials (see docs/deploying.md)
deploy: functions node-deps
	cd infra && $(CDK) deploy $(CDK_CONFIG) $(CDK_ARGS)

## invoke: every sample event in events/ through its function under the Lambda RIE, against the local
##   cluster of make up; or one: make invoke FN=evaluate EVENT=events/evaluate-plan.json NODETIDE_CONFIG_FILE=nodetide.yaml.
##   Built for this machine; ARCH=arm64 builds the deployed architecture and runs it under qemu
ARCH ?= $(shell $(GO) env GOARCH)
INVOKE_BUILD := build/invoke-$(ARCH)

$(INVOKE_BUILD)/%/bootstrap: FORCE
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build $(LAMBDA_FLAGS) -o $@ ./functions/$*

invoke:
	@if [ -z "$(FN)$(EVENT)" ]; then \
		$(MAKE) --no-print-directory $(FUNCTIONS:%=$(INVOKE_BUILD)/%/bootstrap) && \
		ARCH=$(ARCH) BOOTSTRAP_DIR=$(INVOKE_BUILD) infra/invoke.sh --all; \
	else \
		case "$(FN)" in evaluate|drain|schedule) ;; *) echo "usage: make invoke [FN=evaluate|drain|schedule EVENT=events/<file>.json]" >&2; exit 2;; esac; \
		$(MAKE) --no-print-directory $(INVOKE_BUILD)/$(FN)/bootstrap && \
		ARCH=$(ARCH) infra/invoke.sh "$(FN)" "$(EVENT)" "$(INVOKE_BUILD)/$(FN)/bootstrap"; \
	fi

## release: dist/ for VERSION=x.y.z (or x.y.z-pre): the CLI for linux and darwin on amd64 and arm64, the
##   three functions' zips (linux/arm64, as deployed), the template synthesized for nodetide.example.yaml
##   and SHA256SUMS. Built from the commit (a tree with uncommitted changes is refused), reproducibly: the
##   same commit and Go version build the same bytes (go run ./hack/release -h lists its options)
VERSION ?=
DIST ?= dist
release: node-deps
	GO=$(GO) $(GO) run ./hack/release -version "$(VERSION)" -out $(DIST) -replace

## release-check: the release built twice, into two directories, and their SHA256SUMS compared (the
##   tree may have uncommitted changes; RELEASE_CHECK_FRESH_CACHE=1 compiles the second from an empty
##   Go build cache, which takes far longer but proves the compiler's output, not only the link, the
##   zips and the template, the same)
RELEASE_CHECK_FRESH_CACHE ?=
release-check: node-deps
	@tmp=$$(mktemp -d) && trap 'chmod -R u+w "$$tmp"; rm -rf "$$tmp"' EXIT && \
	GO=$(GO) $(GO) run ./hack/release -version 0.0.0-check -allow-dirty -out "$$tmp/a" && \
	$(if $(RELEASE_CHECK_FRESH_CACHE),GOCACHE="$$tmp/gocache") GO=$(GO) $(GO) run ./hack/release -version 0.0.0-check -allow-dirty -out "$$tmp/b" && \
	diff "$$tmp/a/SHA256SUMS" "$$tmp/b/SHA256SUMS" && \
	echo "release-check: both builds are the same bytes:" && cat "$$tmp/a/SHA256SUMS"

## up: a local cluster (control plane, dynalite, the drain state machine) that keeps running in the
##   background; writes nodetide.local.yaml and .nodetide-up/env and prints how to use them
up: testbed node-deps
	@hack/up.sh up

## down: stop what make up started
down:
	@hack/up.sh down

clean:
	rm -rf build bin $(DIST)

FORCE:

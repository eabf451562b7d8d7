# nodetide — see README.md.
SHELL := /usr/bin/env bash
GO ?= go
FUNCTIONS := evaluate drain schedule
LAMBDA_ENV := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_FLAGS := -trimpath -tags lambda.norpc -ldflags "-s -w"
TEST_TIMEOUT ?= 40m

.PHONY: build functions cli testbed node-deps test test-unit fuzz bench demo measure vet fmt clean synth deploy invoke FORCE

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
	$(GO) test -run '^$$' -fuzz '^FuzzReadSnapshot$$' -fuzztime $(FUZZTIME) ./pkg/planner/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./pkg/schedule/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./pkg/evaluate/
	$(GO) test -run '^$$' -fuzz '^FuzzParseEvent$$' -fuzztime $(FUZZTIME) ./pkg/drain/

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod / go.sum are not tidy: run go mod tidy"; exit 1; }

## bench: planner and config benchmarks (speed and memory goals)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x ./pkg/planner/ ./pkg/config/

## demo: the evaluate cycle on a local control plane, step by step
demo: testbed node-deps
	$(GO) run ./hack/demo

## measure: size the three functions from measured runs on the local test bed (a realistic cluster; the
##   functions under the Lambda RIE), time 50 scale-ups through the webhook trigger, and write
##   infra/measurements.md; about ten minutes. MEASURE_ARGS adds
##   options, e.g. MEASURE_ARGS="-nodes 400 -pods 8000" (go run ./hack/measure -h lists them)
MEASURE_ARGS ?=
measure: testbed node-deps
	$(GO) run ./hack/measure $(MEASURE_ARGS)

## synth: the CloudFormation template (infra/cdk.out) from CONFIG (default: NODETIDE_CONFIG_FILE, else
##   nodetide.example.yaml); needs no AWS credentials. CDK_ARGS adds cdk options, e.g. -c subnetIds=a,b
CONFIG ?= $(NODETIDE_CONFIG_FILE)
CDK_ARGS ?=
CDK := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 CDK_DISABLE_CLI_TELEMETRY=true ../node_modules/.bin/cdk
CDK_CONFIG = $(if $(CONFIG),-c config=$(abspath $(CONFIG)))

synth: functions node-deps
	cd infra && $(CDK) synth --quiet $(CDK_CONFIG) $(CDK_ARGS)
	@echo "synth: infra/cdk.out/$$(cd infra/cdk.out && ls *.template.json)"

## deploy: synth and deploy the stack for CONFIG with the current AWS credentials (see infra/README.md)
deploy: functions node-deps
	cd infra && $(CDK) deploy $(CDK_CONFIG) $(CDK_ARGS)

## invoke: run build/$(FN)/bootstrap under the Lambda RIE with EVENT, e.g.
##   make invoke FN=evaluate EVENT=events/evaluate-plan.json NODETIDE_CONFIG_FILE=nodetide.yaml
invoke:
	@case "$(FN)" in evaluate|drain|schedule) ;; *) echo "usage: make invoke FN=evaluate|drain|schedule EVENT=events/<file>.json" >&2; exit 2;; esac
	@$(MAKE) --no-print-directory build/$(FN)/bootstrap
	infra/invoke.sh "$(FN)" "$(EVENT)"

clean:
	rm -rf build bin

FORCE:

# prewarm — the commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

# One cargo target directory outside the checkout, so clean clones (CI) reuse compiled crates.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/prewarm/target
export SAM_CLI_TELEMETRY := 0
# The request traces live in the shared folder beside the checkout.
TRACES ?= $(abspath $(CURDIR)/../shared/traces)
OUT ?= out
ARCH ?= arm64

.PHONY: help build test unit infra-test sam-build sam-artifact release lint e2e serving-gap drain-repeat soak stack-up stack-down demo goals bench weigh-forecasters fuzz invoke-local lambda-figures deploy drain-hpa drain-apf-storm

help:
	@echo "make demo    every policy and its frontier on 14 days of ServeGen, a superposed Azure trace and burst-180 (no cloud needed)"
	@echo "make test    everything CI runs: lint, unit tests, infra tests, end-to-end on the local stack"
	@echo "make goals   the policy's goals measured on the simulator (slow; not part of make test)"
	@echo "make release VERSION=x.y.z [SOURCE_URL=https://...]   the release page's files in out/release/x.y.z (zip, template, chart, SHA256SUMS)"
	@echo "make lint | unit | infra-test | sam-build | e2e | serving-gap | drain-repeat | drain-hpa | drain-apf-storm | soak | bench | weigh-forecasters | fuzz | build | invoke-local | lambda-figures | deploy"

## Lambda artifacts (cargo-lambda + zig from PyPI, installed on first use).
LAMBDA_VENV := $(HOME)/.cache/prewarm/venv/lambda/bin
INFRA_VENV := $(HOME)/.cache/prewarm/venv/infra/bin

build:
	infra/tools.sh lambda >/dev/null
	PATH="$(LAMBDA_VENV):$$PATH" cargo lambda build --release --$(ARCH)

## Everything CI runs. e2e runs every Rust test too (`cargo test -- --include-ignored`, with the
## stack up), so `unit` is not repeated here. sam-build: the deploy's arm64 artifact, checked.
test: lint sam-build infra-test e2e

lint:
	infra/lint.sh

unit:
	cargo test --all-targets

infra-test:
	infra/test.sh

## `sam build` (arm64 by samconfig.toml) as `make deploy` runs it, then tests/build: both
## functions' bootstrap is an aarch64 ELF newer than the sources (docs/testing.md, "What `make
## test` runs"). --no-cached: SAM's cache keys on file contents and would copy an old artifact after a
## checkout that only touched files; cargo's own freshness check (mtimes) decides instead.
## The release files are made from that same artifact (scripts/release.sh) and checked with it:
## the zip holds exactly the bootstrap that was checked, under 8 MB.
RELEASE_CHECK_VERSION := 0.0.0-check
sam-build: sam-artifact
	scripts/release.sh $(RELEASE_CHECK_VERSION) $(OUT)/release/$(RELEASE_CHECK_VERSION)
	PREWARM_RELEASE_DIR=$(OUT)/release/$(RELEASE_CHECK_VERSION) PREWARM_RELEASE_VERSION=$(RELEASE_CHECK_VERSION) \
	  $(INFRA_VENV)/python -m pytest -q tests/build

sam-artifact:
	infra/lint.sh venv
	infra/tools.sh lambda >/dev/null
	PATH="$(DEPLOY_PATH)" sam build --no-cached

## What a release page carries, built from a clean clone: the arm64 Lambda zip, the template
## that points at it (deploy with `sam deploy`, no Rust needed), the chart and SHA256SUMS.
## The release's own checks are tests/build (run by `make sam-build` on a check version).
VERSION ?=
SOURCE_URL ?=
release: sam-artifact
	@test -n "$(VERSION)" || { echo "make release VERSION=x.y.z" >&2; exit 2; }
	SOURCE_URL=$(SOURCE_URL) scripts/release.sh $(VERSION) $(OUT)/release/$(VERSION)
	PREWARM_RELEASE_DIR=$(OUT)/release/$(VERSION) PREWARM_RELEASE_VERSION=$(VERSION) \
	  PREWARM_RELEASE_SOURCE_URL=$(SOURCE_URL) \
	  $(INFRA_VENV)/python -m pytest -q tests/build

## Brings the local stack up, runs the stack-gated Rust tests and the pytest scenarios, tears down.
e2e:
	tests/stack/e2e

## The serving gap of a spot interruption, prewarm vs Karpenter alone, for a 30 s and a 90 s node
## boot (a fresh stack each; about 12 min; not part of `make test`, whose e2e runs the prewarm
## case once with the stack's 10 s boot). BOOTS="30s" for one.
BOOTS ?= 30s 90s
serving-gap:
	tests/stack/serving-gap $(BOOTS)

## The interruption scenarios N times in a row on one stack (Rust fault matrix and surge tests,
## the pytest drain scenarios, the production-timing drain); a line per round and a summary. Not
## part of `make test`. DRAIN_REPEAT_ONLY=production runs only the production-timing drain
## (production-hpa and apf-storm: the targets below).
N ?= 10
drain-repeat:
	tests/stack/drain-repeat $(N)

## One production-timing case N times (docs/testing.md): Deployment-owned pods under HPAs, and
## two drains through a 429 storm from API Priority and Fairness. About 6 min a round; not in make test.
drain-hpa:
	DRAIN_REPEAT_ONLY=production-hpa tests/stack/drain-repeat $(N)

drain-apf-storm:
	DRAIN_REPEAT_ONLY=apf-storm tests/stack/drain-repeat $(N)

## The tick left running 25 minutes (SOAK_SECONDS) on a stack of its own: rise, hold, fall, a
## hanging metrics endpoint, two targets on one NodePool (tests/e2e/test_soak.py). Not in `make test`.
SOAK_SECONDS ?= 1500
soak:
	tests/stack/soak $(SOAK_SECONDS)

stack-up:
	tests/stack/up

stack-down:
	tests/stack/down

## The three workloads of docs/results.md, every policy with its knob swept (frontiers):
## 14 days of ServeGen m-large (knobs chosen on the first 7 days, the last 7 scored), the Azure
## conversation trace superposed 20 times, and burst-180. 1-hour workloads burn in 900 s (the
## metric window) instead of the default 1800 s so that half an hour is scored.
SERVEGEN_RATE_SCALE ?= 0.05
## Every policy: the default set plus the baselines users pick instead (asked for by name).
DEMO_POLICIES := reactive,cluster-autoscaler,static-peak,buffer,buffer-pct,prewarm,node-hints,ideal,lower-bound,slo-bound,scheduled-floor,hpa-target,prewarm-floor
demo:
	cargo build --release --bin prewarm
	mkdir -p $(OUT)
	$(CARGO_TARGET_DIR)/release/prewarm simulate --trace "$(TRACES)/servegen-m-large" --trace-dir "$(TRACES)" \
	  --rate-scale $(SERVEGEN_RATE_SCALE) --train-days 7 --policies $(DEMO_POLICIES) --plot-dir "$(OUT)"
	$(CARGO_TARGET_DIR)/release/prewarm simulate --trace "$(TRACES)/AzureLLMInferenceTrace_conv.csv" \
	  --superpose 20 --burn-in 900 --policies $(DEMO_POLICIES) --plot-dir "$(OUT)"
	$(CARGO_TARGET_DIR)/release/prewarm simulate --scenario burst-180 --burn-in 900 \
	  --policies $(DEMO_POLICIES) --plot-dir "$(OUT)"

## The policy's goals measured (NOT part of `make test`: about 30 min on 2 cores): prewarm's warm
## replicas against Karpenter alone, the baselines and both bounds on 14-day ServeGen, multi-day
## diurnal and cron-bursts (knobs chosen on training days), bursty and burst-180, seeds 11-15
## (never tuned on), at the default lead time in the exact and the rough world; prints the table
## (goal, number per seed, mean and 95 % interval, verdict and why) and keeps the JSON in
## $(OUT)/goals/ (`scripts/goals.py --from-json` re-renders; `--only` and `--worlds` run a
## subset, `--profiles` and `--profile-workloads` add startup profiles).
goals:
	cargo build --release --bin prewarm
	python3 scripts/goals.py --bin $(CARGO_TARGET_DIR)/release/prewarm --traces "$(TRACES)" \
	  --out "$(OUT)" --servegen-rate-scale $(SERVEGEN_RATE_SCALE) | tee "$(OUT)/goals.md"

bench:
	cargo bench

## The instrument that weighs augurs' forecasters against prewarm's (its own workspace, so augurs
## stays out of the Lambda's build): its tests. Figures: docs/notebook/.
weigh-forecasters:
	cargo test --release --manifest-path tools/weigh-forecasters/Cargo.toml

## Coverage-guided fuzzing of the interruption parsing (cargo-fuzz on nightly; NOT part of `make
## test`): FUZZ_RUNS executions per target from the committed corpus, stopping at the first
## crash, then the corpus is minimised in place to a smallest set keeping every covered edge (hit
## counts ignored: a few hundred KB; commit it: `cargo test` replays it). A crash
## leaves its input in fuzz/artifacts/<target>/: fix it and copy it to fuzz/regressions/<target>/.
FUZZ_RUNS ?= 10000000
FUZZ_TARGETS ?= sqs_record event_document
FUZZ_FLAGS := -s none --debug-assertions --target-dir $(HOME)/.cache/prewarm/fuzz-target
fuzz:
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	for t in $(FUZZ_TARGETS); do \
	  cargo +nightly fuzz run $(FUZZ_FLAGS) $$t fuzz/corpus/$$t -- \
	    -dict=fuzz/dict/events.dict -runs=$(FUZZ_RUNS) -max_len=16384 -print_final_stats=1 || exit 1; \
	  cargo +nightly fuzz cmin $(FUZZ_FLAGS) $$t fuzz/corpus/$$t -- -use_counters=0 -set_cover_merge=1 || exit 1; \
	done

## One tick and one interruption batch through the Lambda Runtime API emulator (needs the stack).
invoke-local:
	tests/stack/invoke-local

## Local Lambda figures (docs/results.md, "Lambda figures"): cold init, peak RSS, tick CPU for 20 targets
## through the Runtime API emulator, on a stack of its own (up, measure, down). Not in `make test`.
lambda-figures:
	tests/stack/up
	tests/stack/lambda-figures || rc=$$?; tests/stack/down; exit $${rc:-0}

## The lambda venv comes first on PATH: cargo-lambda runs `python3 -m ziglang`, and only that
## venv's python3 has ziglang (sam itself is only in the infra venv, found after it).
DEPLOY_PATH := $(LAMBDA_VENV):$(INFRA_VENV):$(PATH)

## The guided deploy saves its answers (cluster name, workspace, topic) in the config file it
## reads: a copy of samconfig.toml of your own, made on the first run, never the tracked file.
SAMCONFIG ?= $(HOME)/.config/prewarm/samconfig.toml

deploy:
	infra/lint.sh venv
	infra/tools.sh lambda >/dev/null
	PATH="$(DEPLOY_PATH)" sam build
	test -f "$(SAMCONFIG)" || { mkdir -p "$(dir $(SAMCONFIG))" && cp samconfig.toml "$(SAMCONFIG)"; }
	PATH="$(DEPLOY_PATH)" sam deploy --guided --config-file "$(SAMCONFIG)"

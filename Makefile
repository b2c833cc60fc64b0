# Build, run and test aoctl. `make demo` runs it on a scratch repository; `make test` is what CI runs.

CARGO ?= cargo
BIN := target/debug/aoctl

.PHONY: build demo demo-stop test unit e2e lint fmt schema bench clean

build:
	$(CARGO) build --workspace --all-targets

## Run the product on its embedded defaults: a scratch repository, a server on 127.0.0.1:7421.
demo:
	$(CARGO) build -p aoctl
	e2e/demo.sh

demo-stop:
	AOCTL_DATA_DIR=$(CURDIR)/.scratch/demo/data AOCTL_SERVER=http://127.0.0.1:7421 $(BIN) down

## Everything CI checks: formatting, lints, unit, integration and end-to-end tests, and the
## stand-ins' own tests (GitHub, GitLab, Linear); installs and starts what they need first (e2e/test.sh).
test:
	CARGO="$(CARGO)" e2e/test.sh

unit:
	$(CARGO) test --workspace --lib --bins

e2e:
	$(CARGO) test -p aoctl --test e2e

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## Regenerate manifests/schema/ and the CRDs (manifests/crds/, charts/aoctl/crds/) from the api types.
schema:
	UPDATE_SCHEMAS=1 $(CARGO) test -p aoctl-api --test schema_fresh --test crd_fresh

bench:
	$(CARGO) build --release -p aoctl
	e2e/bench.sh

## Fuzz the manifest and request-body decoders and the webhook parsers with cargo fuzz (nightly),
## FUZZ_SECONDS per target; installs cargo-fuzz if missing. `make fuzz-ci` is CI's short run.
FUZZ_SECONDS ?= 300

.PHONY: fuzz fuzz-ci

fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

fuzz-ci:
	FUZZ_SECONDS=20 fuzz/run.sh

clean:
	$(CARGO) clean
	rm -rf .scratch
